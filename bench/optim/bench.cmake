# bench_optim: step time and state bytes of each optimizer on the benchmark models' parameters (run through
# bench/optim/run.sh, which also runs the PyTorch / Transformers / bitsandbytes peer bench/optim/torch_optim.py).
add_executable(bench_optim ${CMAKE_CURRENT_LIST_DIR}/bench_optim.cpp)
target_link_libraries(bench_optim PRIVATE hpctrain_torch)
target_compile_options(bench_optim PRIVATE ${HPCTRAIN_WARNINGS})
