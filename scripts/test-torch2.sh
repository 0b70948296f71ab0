#!/usr/bin/env bash
# The test suite against the second LibTorch configuration (LibTorch 2.x from the pinned `torch` wheel, CUDA
# build; on a machine without a GPU everything runs on the CPU). Extra arguments go to ctest. It runs the tests
# labelled torch2 (tests/torch2.cmake, Note [The LibTorch 2 stage]): those whose result can depend on the LibTorch
# version and the interoperability tests; HPCTRAIN_TORCH2_ALL=1 runs every test but the Slurm, two-host and jobs/
# ones (they do not depend on the LibTorch build: they run once, in scripts/test.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
export HPCTRAIN_BUILD_DIR=${HPCTRAIN_BUILD_DIR:-build-torch2}
scripts/install-deps.sh build test
# The benchmarks are not built here: no test runs them, and they cost CI minutes (scripts/setup-torch2.sh alone builds
# them for benchmarking against LibTorch 2).
# Nor are the test programs of areas LibTorch does not touch: only the target torch2_tests (tests/torch2.cmake), unless
# every test runs.
targets=(--target torch2_tests)
[[ ${HPCTRAIN_TORCH2_ALL:-0} == 1 ]] && targets=()
HPCTRAIN_CMAKE_ARGS="-DHPCTRAIN_BUILD_BENCH=OFF ${HPCTRAIN_CMAKE_ARGS:-}" scripts/setup-torch2.sh "${targets[@]}"
# The venv's TensorBoard reads the event files in mpi.train.tensorboard (the other tests keep python3: numpy, h5py).
venv=${HPCTRAIN_TORCH2_VENV:-.venv-torch2} && [[ "$venv" == /* ]] || venv=$PWD/$venv
export HPCTRAIN_TENSORBOARD_PYTHON=${HPCTRAIN_TENSORBOARD_PYTHON:-$venv/bin/python}
# Its transformers loads causal-LM folders that hpctrain wrote (mpi.train.causal_lm); its peft loads and trains
# LoRA adapters (mpi.train.lora_peft).
export HPCTRAIN_TRANSFORMERS_PYTHON=${HPCTRAIN_TRANSFORMERS_PYTHON:-$venv/bin/python}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cd "$HPCTRAIN_BUILD_DIR"
if [[ ${HPCTRAIN_TORCH2_ALL:-0} == 1 ]]; then
  ctest --output-on-failure --timeout 900 -j "${HPCTRAIN_TEST_JOBS:-2}" -LE '^(slurm|multihost|jobs)$' "$@"
else
  ctest --output-on-failure --timeout 900 -j "${HPCTRAIN_TEST_JOBS:-2}" -L '^torch2$' "$@"
fi
