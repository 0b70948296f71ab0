# The CUDA path's logic, tested on the CPU (no GPU needed; issue 22, docs/gpu.md). One ctest per suite, labelled
# cuda-logic (`ctest -L cuda-logic`), in both LibTorch configurations.
hpctrain_test_binary(cuda_logic LIBS hpctrain_torch)
foreach(suite device_binding comm_thread_start autocast_cuda fenced_collectives bucket_place
              optimizers_on_meta adamw_8bit_kernel_lookup)
  add_test(NAME cuda_logic.${suite} COMMAND test_cuda_logic --run_test=${suite} --log_level=test_suite)
  set_tests_properties(cuda_logic.${suite} PROPERTIES LABELS cuda-logic TIMEOUT 120)
endforeach()
