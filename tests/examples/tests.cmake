# The examples/ programs are built with the tests and run under mpirun -np 2 (label mpi).
add_executable(custom_loop ${PROJECT_SOURCE_DIR}/examples/custom_loop.cpp)
target_link_libraries(custom_loop PRIVATE hpctrain_torch)
target_compile_options(custom_loop PRIVATE ${HPCTRAIN_WARNINGS})
add_test(NAME mpi.examples.custom_loop
         COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/test_custom_loop.sh $<TARGET_FILE:hpctrain> ${PROJECT_SOURCE_DIR}
                 ${MPIEXEC_EXECUTABLE} $<TARGET_FILE:custom_loop>)
set_tests_properties(mpi.examples.custom_loop PROPERTIES LABELS mpi TIMEOUT 300
  ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMPI_MCA_rmaps_base_oversubscribe=1")
