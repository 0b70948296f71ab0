# mpirun -np 2 tests of the gradient reducer and the replica-consistency checks: one executable, one
# ctest entry per case (mpi.ddp.<case>).
add_executable(mpi_ddp_test mpi_ddp/main.cpp mpi_ddp/reducer_cases.cpp mpi_ddp/consistency_cases.cpp
  mpi_ddp/row_sparse_cases.cpp mpi_ddp/local_sgd_cases.cpp mpi_ddp/bf16_cases.cpp)
target_link_libraries(mpi_ddp_test PRIVATE hpctrain_torch)
target_include_directories(mpi_ddp_test PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/ddp)  # tiny_model.hpp
target_compile_options(mpi_ddp_test PRIVATE ${HPCTRAIN_WARNINGS})
# Defines helpers under the names row_sparse_cases.cpp uses (Note [Unity build]).
set_source_files_properties(mpi_ddp/bf16_cases.cpp PROPERTIES SKIP_UNITY_BUILD_INCLUSION ON)
foreach(case reducer unused no_sync late broadcast structure row_sparse grad_views local_sgd bf16_wire zero)
  hpctrain_mpi_test(ddp.${case} 2 $<TARGET_FILE:mpi_ddp_test> ${case})
endforeach()
