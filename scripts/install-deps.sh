#!/usr/bin/env bash
# Installs the Debian/Ubuntu packages hpctrain needs, only those missing (idempotent).
# HPCTRAIN_SKIP_INSTALL=1 skips this step (clusters that provide modules instead).
# Usage: scripts/install-deps.sh [build|test|run|fuzz|slurm]...   (default: build)
set -euo pipefail

if [[ "${HPCTRAIN_SKIP_INSTALL:-0}" == "1" ]]; then
  echo "install-deps: HPCTRAIN_SKIP_INSTALL=1, not installing packages"
  exit 0
fi

build_packages=(build-essential cmake ninja-build pkg-config git
  libopenmpi-dev openmpi-bin libhdf5-dev libtorch-dev
  libboost-program-options-dev libboost-test-dev libfmt-dev nlohmann-json3-dev
  libutf8proc-dev libpcre2-dev zlib1g-dev
  # OpenBLAS with OpenMP: ~18x faster fp32 GEMM than Debian's default reference BLAS.
  libopenblas0-openmp)
# Data: the default text dataset (fortunes), the documented image example (Fashion-MNIST) and the SFT example's
# dictionary (GCIDE, scripts/sft-example.sh).
data_packages=(fortunes dataset-fashion-mnist dict-gcide python3)
# Tests read files back with h5py to prove Python users can open them.
test_packages=(python3-h5py)
# The slurm tests' one-node cluster (scripts/slurm-local.sh; not the slurm-wlm metapackage, which pulls 34
# packages), the two-host tests' network namespaces (iproute2) and strace, which holds a rank's renames so that
# a link cut lands at a set point of a save or a run (tests/multihost/test_link_down_*.sh).
slurm_packages=(slurmctld slurmd slurm-client munge iproute2 strace)
# scripts/fuzz.sh: libFuzzer needs clang and its sanitizer runtimes (docs/fuzzing.md).
fuzz_packages=(clang-14 libclang-rt-14-dev)

wanted=("${build_packages[@]}" "${data_packages[@]}")
for group in "$@"; do
  case "$group" in
    build|run) ;;
    test) wanted+=("${test_packages[@]}") ;;
    fuzz) wanted+=("${fuzz_packages[@]}") ;;
    slurm) wanted+=("${slurm_packages[@]}") ;;
    *) echo "install-deps: unknown group '$group' (build, test, run, fuzz, slurm)" >&2; exit 2 ;;
  esac
done

missing=()
for package in "${wanted[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$package" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$package")
done
if [[ ${#missing[@]} -eq 0 ]]; then
  echo "install-deps: all ${#wanted[@]} packages present"
  exit 0
fi

sudo=""
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null || { echo "install-deps: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  sudo="sudo"
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -q
$sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
