# Gradient reducer and replica-consistency checks with the single-process communicator
# (the mpirun -np 2 cases are in tests/mpi_ddp/).
hpctrain_test_binary(ddp LIBS hpctrain_torch)
