# Note [Two tests at a time]: scripts/test.sh and scripts/test-torch2.sh run ctest two tests at a time
# (HPCTRAIN_TEST_JOBS, default 2: CI's machine has 2 cores, and most tests leave one idle while a single process
# starts Python or reads files: the whole suite took 688 s at -j2 for 1,375 s of summed test time, on this 2-core VM). A test
# that measures time (a collective or stall timeout, a link delay, the comm model's fit, Slurm's time limit) runs
# alone (RUN_SERIAL): another test's load would move its figures. The sanitizer stage (scripts/sanitize.sh) runs two
# at a time too.
set(HPCTRAIN_SERIAL_TESTS
  "^mpi\\.(collective_failure|stall_timeout)$"
  "^mpi\\.train\\.(bench_comm|collective_timeout|stop_dead_peer)$"
  "^multihost\\."
  "^slurm\\.time_left$")
hpctrain_tests_matching(hpctrain_serial ${HPCTRAIN_SERIAL_TESTS})
set_tests_properties(${hpctrain_serial} PROPERTIES RUN_SERIAL ON)
