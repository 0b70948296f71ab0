#!/usr/bin/env bash
# The prepared check for a GPU machine (issue 13): builds hpctrain against that machine's `torch` (CUDA),
# runs the unit tests, the 1-rank vs 2-rank equivalence on CUDA (both ranks sharing the GPU), and writes
# what it measured under OUT_DIR. The GPU machine has torch, cmake, ninja and nvcc but none of our other
# dependencies and no network: `prepare` (here, where Debian's mirrors are reachable) downloads the Debian 12
# packages into .gpu-deps/debs (about 25 MiB, git-ignored; carry it), and `run` (there) unpacks them into
# .gpu-deps/root with `dpkg -x` and builds against that prefix.
#   scripts/gpu-check.sh prepare
#   scripts/gpu-check.sh run [OUT_DIR=.gpu-deps/out]     (on the CPU machine: a dry run, CUDA code built, not run)
# Environment: PYTHON (the interpreter with torch, default python3), JOBS (build jobs, default nproc).
set -euo pipefail
cd "$(dirname "$0")/.."
deps=$PWD/.gpu-deps
# What the build and the tests need beyond torch, cmake, ninja and a compiler; their own runtime
# libraries come from the machine (libc, libstdc++, zlib, curl's dependencies).
packages=(
  libopenmpi-dev libopenmpi3 openmpi-bin openmpi-common libpmix2 libhwloc15 libevent-core-2.1-7
  libevent-pthreads-2.1-7 libfabric1 libucx0 libibverbs1 libnl-3-200 libnl-route-3-200 libpsm2-2
  libhdf5-dev libhdf5-103-1 libhdf5-cpp-103-1 libhdf5-hl-100 libsz2 libaec0 libcurl3-gnutls
  libboost1.74-dev libboost-program-options1.74-dev libboost-program-options1.74.0
  libboost-test1.74-dev libboost-test1.74.0 libfmt-dev libfmt9 nlohmann-json3-dev libutf8proc-dev libutf8proc2
  libpcre2-dev libpcre2-8-0 libpcre2-16-0 libpcre2-32-0 libpcre2-posix3
  zlib1g-dev pkgconf libpkgconf3 pkgconf-bin
)

prepare() {
  mkdir -p "$deps/debs"
  (cd "$deps/debs" && apt-get download "${packages[@]}")
  du -sh "$deps/debs"
}

# Unpacks the packages into $deps/root and points compilers, pkg-config, CMake and Open MPI at it.
use_prefix() {
  local root=$deps/root
  if [[ ! -d $root/usr ]]; then
    for deb in "$deps"/debs/*.deb; do dpkg -x "$deb" "$root"; done
    # Debian's maintainer scripts (update-alternatives) make these names; dpkg -x runs no scripts.
    for tool in mpirun mpiexec mpicc mpicxx; do ln -sf "$tool.openmpi" "$root/usr/bin/$tool"; done
  fi
  local arch=x86_64-linux-gnu
  export OPAL_PREFIX=$root/usr                       # relocates Open MPI (its wrappers, plugins, help files)
  export PATH=$root/usr/bin:$PATH
  export LD_LIBRARY_PATH=$root/usr/lib/$arch:$root/usr/lib/$arch/hdf5/serial${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  export PKG_CONFIG=$root/usr/bin/pkgconf PKG_CONFIG_SYSROOT_DIR=$root
  export PKG_CONFIG_LIBDIR=$root/usr/lib/$arch/pkgconfig:$root/usr/share/pkgconfig
  prefix_path="$root/usr;$root/usr/lib/$arch/cmake"  # after torch's own folders (build)
  prefix_args="-DMPI_C_COMPILER=$root/usr/bin/mpicc -DMPIEXEC_EXECUTABLE=$root/usr/bin/mpirun
    -DHDF5_C_INCLUDE_DIR=$root/usr/include/hdf5/serial -DHDF5_hdf5_LIBRARY_RELEASE=$root/usr/lib/$arch/hdf5/serial/libhdf5.so
    -DHDF5_C_COMPILER_EXECUTABLE=HDF5_C_COMPILER_EXECUTABLE-NOTFOUND -DHDF5_ROOT=$root/usr
    -DZLIB_ROOT=$root/usr -DBoost_ROOT=$root/usr"
}

# Configures and builds build-gpu against $PYTHON's torch with CUDA on.
build() {
  local python=${PYTHON:-python3}
  local torch_dir
  torch_dir=$("$python" -c 'import os, torch; print(os.path.dirname(torch.__file__))')
  local nvcc
  nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
  # shellcheck disable=SC2086
  TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-9.0} cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release \
    "-DCMAKE_PREFIX_PATH=$torch_dir;$torch_dir/share/cmake;$prefix_path" \
    $prefix_args -DHPCTRAIN_WITH_CUDA=ON -DCMAKE_CUDA_COMPILER="$nvcc" -DCUDAToolkit_ROOT="$(dirname "$(dirname "$nvcc")")"
  cmake --build build-gpu -j "${JOBS:-$(nproc)}"
}

run() {
  local out=${1:-$deps/out}
  mkdir -p "$out"
  use_prefix
  { date -u; nvidia-smi -L 2>&1 || echo "no nvidia-smi: no GPU here (dry run)"; mpirun --version | head -1
    ${PYTHON:-python3} -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "gpus", torch.cuda.device_count())'
  } | tee "$out/machine.txt"
  build 2>&1 | tail -20 | tee "$out/build.txt"
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  (cd build-gpu && ctest -L unit --output-on-failure --timeout 300 2>&1 | tail -25) | tee "$out/unit.txt"
  local gpus
  gpus=$(${PYTHON:-python3} -c 'import torch; print(torch.cuda.device_count())')
  if [[ $gpus -gt 0 ]]; then
    # Note [One GPU per rank]: two ranks on one GPU need HPCTRAIN_SHARE_GPUS=1.
    (cd build-gpu && HPCTRAIN_TEST_DEVICE=cuda HPCTRAIN_SHARE_GPUS=1 HPCTRAIN_TEST_PYTHON=${PYTHON:-python3} \
      ctest -R 'mpi.train.equivalence' --output-on-failure --timeout 300 2>&1 | tail -25) | tee "$out/equivalence.txt"
  else
    echo "no CUDA device: equivalence on CUDA not run (dry run)" | tee "$out/equivalence.txt"
  fi
  throughput "$([[ $gpus -gt 0 ]] && echo cuda || echo cpu)" "$out"
}

# The DistilBERT-base-shaped model (dim 768, 6 layers, seq 128, batch 32), bf16: hpctrain's forward + backward
# against PyTorch eager + autocast in the same run, interleaved (3 rounds), and MFU against a measured bf16 GEMM.
throughput() {
  local device=$1 out=$2 python=${PYTHON:-python3} steps=20
  [[ $device == cpu ]] && steps=2  # the dry run only checks that it runs
  local common=(--model distilbert-base --device "$device" --mixed-precision bf16 --steps "$steps" --warmup 3)
  : >"$out/throughput.jsonl"
  for round in 1 2 3; do
    build-gpu/bench/bench_models "${common[@]}" --threads 4 >>"$out/throughput.jsonl"
    "$python" bench/models/torch_models.py "${common[@]}" --threads 4 >>"$out/throughput.jsonl"
  done
  "$python" bench/models/gemm_peak.py --device "$device" --dtype bf16 $([[ $device == cpu ]] && echo --n 1024) \
    >>"$out/throughput.jsonl"
  "$python" - "$out/throughput.jsonl" <<'PYEOF' | tee "$out/throughput.txt"
import json, statistics, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
peak = next(r["tflops"] for r in rows if "tflops" in r)
dim, layers, ffn, seq, batch, vocab = 768, 6, 3072, 128, 32, 30522
# Training FLOPs per step: 6 per parameter-token for the layers and classifier (the embedding lookup is no
# product) plus the attention products (QK^T and AV: 2 x 2 x seq x dim per token per layer, x3 with backward).
params = layers * (4 * dim * dim + 2 * dim * ffn) + dim * dim
flops = 6 * params * seq * batch + 3 * 4 * layers * seq * seq * dim * batch
for impl in sorted({r["impl"] for r in rows if "samples_per_s" in r}):
    rates = [r["samples_per_s"] for r in rows if r.get("impl") == impl]
    sps = statistics.median(rates)
    mfu = sps / batch * flops / 1e12 / peak
    print(f"{impl}: {sps:.1f} samples/s (rounds {min(rates):.1f}-{max(rates):.1f}), "
          f"{sps / batch * flops / 1e12:.1f} TFLOP/s, MFU {100 * mfu:.1f} % of the measured bf16 GEMM {peak:.0f} TFLOP/s")
PYEOF
}

case ${1:-} in
  prepare) prepare ;;
  run) shift; run "$@" ;;
  *) echo "usage: $0 prepare | run [OUT_DIR]" >&2; exit 2 ;;
esac
