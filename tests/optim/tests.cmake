# The optimizers (src/optim): update rules against torch and bitsandbytes goldens, blockwise quantization,
# optimizer.safetensors checks.
hpctrain_test_binary(optim LIBS hpctrain_torch)
