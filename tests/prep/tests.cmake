# Torch-free prep tests: the pure parts of `prep lm` (a document's ids, packing, the plan) and prep_lm in one
# process on the golden byte-level BPE tokenizers. The CLI scripts (tests/cli/test_prep_lm*.sh) cover MPI runs.
hpctrain_test_binary(prep LIBS hpctrain_base ZLIB::ZLIB)
