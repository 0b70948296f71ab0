hpctrain_test_binary(chat LIBS hpctrain_base)
