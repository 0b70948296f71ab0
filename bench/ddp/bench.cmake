# mpirun -np 2 bench_allreduce: fused allreduce throughput vs bucket size, against per-tensor allreduce.
add_executable(bench_allreduce ${CMAKE_CURRENT_SOURCE_DIR}/ddp/bench_allreduce.cpp)
target_link_libraries(bench_allreduce PRIVATE hpctrain_base)
target_compile_options(bench_allreduce PRIVATE ${HPCTRAIN_WARNINGS})

# mpirun -np N bench_train: data-parallel training steps of the benchmark models (bench/ddp/run.sh runs it
# against PyTorch DDP, bench/ddp/torch_ddp.py).
add_executable(bench_train ${CMAKE_CURRENT_SOURCE_DIR}/ddp/bench_train.cpp)
target_link_libraries(bench_train PRIVATE hpctrain_torch)
target_compile_options(bench_train PRIVATE ${HPCTRAIN_WARNINGS})
