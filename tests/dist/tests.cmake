# Torch-free distributed pieces: bucket assignment, chunking of large MPI counts.
hpctrain_test_binary(dist LIBS hpctrain_base)
