# Loader tests: collation, prefetching, streaming, resume, corrupt files.
hpctrain_test_binary(loader LIBS hpctrain_torch)
