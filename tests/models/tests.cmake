hpctrain_test_binary(models LIBS hpctrain_torch SEPARATE model_test.cpp golden_test.cpp loading_test.cpp
  model_size_test.cpp)
