# Note [The LibTorch 2 stage]: CI runs the whole suite against Debian's LibTorch 1.13 (scripts/test.sh), then builds
# against LibTorch 2.x (scripts/test-torch2.sh) and runs only the tests labelled `torch2` here: the ones whose result
# can depend on the LibTorch version (models, autograd, optimizers, collectives over tensors, checkpoints, bf16,
# CUDA logic) and every interoperability test that needs the venv's transformers/peft/bitsandbytes/tensorboard
# (HPCTRAIN_TRANSFORMERS_PYTHON: skipped in the default stage). Tests of what LibTorch does not touch (prep,
# tokenizers, HDF5, options, signals, failure handling, the run folder) run once, in the default stage: running them
# twice cost CI about a quarter of its budget. A pattern that matches no test is an error (a renamed test must not
# drop out of the stage silently). docs/sanitizers.md ("CI") lists the stage's time.
set(HPCTRAIN_TORCH2_TESTS
  "^unit\\.(blas|blas_kernels_agree|cuda_logic|ddp|io|loader|models|optim|train)$"
  "^cuda_logic\\."
  "^mpi\\.ddp\\."
  "^mpi\\.examples\\."
  "^mpi\\.train\\.(causal_lm|causal_lm_features|env|equivalence|final_model|grad_reduce_dtype|gradient_checkpointing)$"
  "^mpi\\.train\\.(chunked_loss_gradients|lora|lora_peft|loss_scaling|packing|qlora|qlora_peft|sft|tensorboard)$"
  "^mpi\\.train\\.(unused_parameters|zero|zero3|zero3_resume|zero3_pretrained)$"
  "^cli\\.test_(generate|model_commands)$")

hpctrain_tests_matching(hpctrain_torch2 ${HPCTRAIN_TORCH2_TESTS})
set_property(TEST ${hpctrain_torch2} APPEND PROPERTY LABELS torch2)

# The programs those tests run: scripts/test-torch2.sh builds only these (target torch2_tests), not the test binaries
# of areas LibTorch does not touch (chat, prep, tokenize, dist, the mpi/ helpers): a test here whose program is
# missing from the list fails ("Could not find executable"), it does not pass unbuilt.
set(HPCTRAIN_TORCH2_TARGETS hpctrain test_blas blas_gemm_dump test_cuda_logic test_ddp test_io test_loader
  test_models test_optim test_train mpi_ddp_test custom_loop mpi_train_unused mpi_train_chunked_loss_gradients)
add_custom_target(torch2_tests)
foreach(target ${HPCTRAIN_TORCH2_TARGETS})
  if(NOT TARGET ${target})
    message(FATAL_ERROR "tests/torch2.cmake: no target '${target}'")
  endif()
  add_dependencies(torch2_tests ${target})
endforeach()
