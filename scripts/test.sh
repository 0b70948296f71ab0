#!/usr/bin/env bash
# The whole test suite on a fresh Debian/Ubuntu machine: installs what is missing, builds, runs ctest
# (unit, cli and `mpirun -np 2` tests; as root also the tests on a local Slurm cluster and on two network-
# namespace "hosts", which are skipped otherwise), two tests at a time (HPCTRAIN_TEST_JOBS; Note [Two tests at a
# time] in tests/serial.cmake). Extra arguments go to ctest (e.g. -L mpi).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh build test slurm
scripts/build.sh
# OpenMPI refuses to run as root unless told; CI machines run as root.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cd "${HPCTRAIN_BUILD_DIR:-build}"
ctest --output-on-failure --timeout 900 -j "${HPCTRAIN_TEST_JOBS:-2}" "$@"
