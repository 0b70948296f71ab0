# Torch-free data tests: HDF5 schema writer/reader/validation, sampler, and the record sources (CSV, JSONL,
# IDX, text, compressed byte sources).
hpctrain_test_binary(data LIBS hpctrain_base ZLIB::ZLIB NO_UNITY)
