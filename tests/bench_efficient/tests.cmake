# bench/efficient's hpctrain side: bench_train's technique options run through the Accelerator and report what
# the table reads (tiny batch; only when the benchmarks are built).
if(HPCTRAIN_BUILD_BENCH)  # bench/ is added after tests/: the target exists at generation
  add_test(NAME mpi.bench_train_techniques
           COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/test_bench_train.sh $<TARGET_FILE:bench_train> ${MPIEXEC_EXECUTABLE})
  set_tests_properties(mpi.bench_train_techniques PROPERTIES LABELS mpi TIMEOUT 120
    ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMPI_MCA_rmaps_base_oversubscribe=1")
endif()
