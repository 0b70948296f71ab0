# MPI tests: plain executables run under `mpirun -np N` (see hpctrain_mpi_test in tests/CMakeLists.txt).

# Two ranks read their shards of one split through ShardLoader; rank 0 checks the union is the split.
add_executable(mpi_shard_read ${CMAKE_CURRENT_LIST_DIR}/shard_read.cpp)
target_link_libraries(mpi_shard_read PRIVATE hpctrain_torch)
target_include_directories(mpi_shard_read PRIVATE ${PROJECT_SOURCE_DIR}/src)
target_compile_options(mpi_shard_read PRIVATE ${HPCTRAIN_WARNINGS})
# 1001 examples over 2 ranks: 501 each, one flagged wrap-around duplicate; batches of 16.
hpctrain_mpi_test(shard_read 2 $<TARGET_FILE:mpi_shard_read> 1001 16)

# run_collectively: a failure on one rank reaches every rank with that rank's message (torch-free).
add_executable(mpi_collective_failure ${CMAKE_CURRENT_LIST_DIR}/collective_failure.cpp)
target_link_libraries(mpi_collective_failure PRIVATE hpctrain_base)
target_compile_options(mpi_collective_failure PRIVATE ${HPCTRAIN_WARNINGS})
hpctrain_mpi_test(collective_failure 2 $<TARGET_FILE:mpi_collective_failure>)

# The collective watchdog (Note [Collective timeout]): a stalled rank ends the job naming the waiting and the
# missing ranks; short waits never fire (torch-free; the script checks the message and the time).
add_executable(mpi_stall_timeout ${CMAKE_CURRENT_LIST_DIR}/stall_timeout.cpp)
target_link_libraries(mpi_stall_timeout PRIVATE hpctrain_base)
target_compile_options(mpi_stall_timeout PRIVATE ${HPCTRAIN_WARNINGS})
add_test(NAME mpi.stall_timeout COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/test_stall_timeout.sh ${MPIEXEC_EXECUTABLE}
         $<TARGET_FILE:mpi_stall_timeout>)
set_tests_properties(mpi.stall_timeout PROPERTIES LABELS mpi TIMEOUT 180
  ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMPI_MCA_rmaps_base_oversubscribe=1")
