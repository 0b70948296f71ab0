# mpirun -np 2 bench_allreduce: fused allreduce throughput vs bucket size, against per-tensor allreduce.
add_executable(bench_allreduce ${CMAKE_CURRENT_SOURCE_DIR}/ddp/bench_allreduce.cpp)
target_link_libraries(bench_allreduce PRIVATE hpctrain_base)
target_compile_options(bench_allreduce PRIVATE ${HPCTRAIN_WARNINGS})
