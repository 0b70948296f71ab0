hpctrain_test_binary(models LIBS hpctrain_torch SEPARATE model_test.cpp)
