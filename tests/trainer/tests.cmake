# Accelerator, checkpoints, resume planning and run_training with the single-process communicator
# (the mpirun -np 2 cases are in tests/mpi_train/).
hpctrain_test_binary(trainer LIBS hpctrain_torch)
