# bench_loss: the head + cross-entropy alone (forward and backward) at each --loss-chunk-tokens, interleaved, to
# choose the default (bench/README.md, "The loss in chunks"); run.sh benchmarks whole training steps.
add_executable(bench_loss ${CMAKE_CURRENT_LIST_DIR}/bench_loss.cpp)
target_link_libraries(bench_loss PRIVATE hpctrain_torch)
target_compile_options(bench_loss PRIVATE ${HPCTRAIN_WARNINGS})
