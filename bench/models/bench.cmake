# bench_models: forward + backward step time of the DistilBERT benchmark model and the CNN (run through
# bench/models/run.sh, which also runs the PyTorch peer bench/models/torch_models.py).
add_executable(bench_models ${CMAKE_CURRENT_LIST_DIR}/bench_models.cpp)
target_link_libraries(bench_models PRIVATE hpctrain_torch)
target_compile_options(bench_models PRIVATE ${HPCTRAIN_WARNINGS})
