hpctrain_test_binary(sources LIBS hpctrain_base ZLIB::ZLIB)
