# io: safetensors files, Hugging Face weight folders and config.json (torch-free).
hpctrain_test_binary(io LIBS hpctrain_base SEPARATE golden_test.cpp hf_config_test.cpp)
