# The CUDA path's logic, tested on the CPU (no GPU needed; issue 22, docs/gpu.md). One ctest per suite, labelled
# cuda-logic (`ctest -L cuda-logic`), in both LibTorch configurations.
hpctrain_test_binary(cuda_logic LIBS hpctrain_torch)
foreach(suite device_binding comm_thread_start autocast_cuda fenced_collectives bucket_place
              optimizers_on_meta adamw_8bit_kernel_lookup packed_attention_cuda_path
              quant4_kernel_elements sharded_gather)
  add_test(NAME cuda_logic.${suite} COMMAND test_cuda_logic --run_test=${suite} --log_level=test_suite)
  set_tests_properties(cuda_logic.${suite} PROPERTIES LABELS cuda-logic TIMEOUT 120)
endforeach()
# Needs a GPU (skipped without one): the CUDA 8-bit AdamW against the CPU implementation, for the GPU check.
if(HPCTRAIN_WITH_CUDA)
  add_test(NAME gpu.adamw_8bit_matches_cpu COMMAND test_cuda_logic --run_test=gpu_agreement --log_level=test_suite)
  # Without a device ctest reports it skipped (Not Run), not passed.
  set_tests_properties(gpu.adamw_8bit_matches_cpu PROPERTIES LABELS gpu TIMEOUT 120
    SKIP_REGULAR_EXPRESSION "Test suite \"gpu_agreement\" is skipped because precondition failed")
endif()
