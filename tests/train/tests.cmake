hpctrain_test_binary(train LIBS hpctrain_torch)
