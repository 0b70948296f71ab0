# BLAS kernel choice: the decision table (unit) and the generic vs fast kernels' GEMM agreement (two processes).
hpctrain_test_binary(blas LIBS hpctrain_base)
get_target_property(blas_sources test_blas SOURCES)
list(FILTER blas_sources EXCLUDE REGEX "gemm_dump\\.cpp$")
set_target_properties(test_blas PROPERTIES SOURCES "${blas_sources}")
add_executable(blas_gemm_dump ${CMAKE_CURRENT_LIST_DIR}/gemm_dump.cpp)
target_link_libraries(blas_gemm_dump PRIVATE hpctrain_torch)
add_test(NAME unit.blas_kernels_agree COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/test_kernels_agree.sh $<TARGET_FILE:blas_gemm_dump>)
set_tests_properties(unit.blas_kernels_agree PROPERTIES LABELS unit)
