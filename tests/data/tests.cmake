# Torch-free data tests: HDF5 schema writer/reader/validation, sampler.
hpctrain_test_binary(data LIBS hpctrain_base)
