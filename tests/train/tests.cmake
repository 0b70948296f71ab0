# Accelerator, precision, checkpoints, run folders, resume planning, schedules, metrics, time limits and
# run_training with the single-process communicator (the mpirun -np 2 cases are in tests/mpi_train/).
hpctrain_test_binary(train LIBS hpctrain_torch SEPARATE trainer_state_validation_test.cpp)
