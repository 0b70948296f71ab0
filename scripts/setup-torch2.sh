#!/usr/bin/env bash
# The second LibTorch configuration: LibTorch 2.x from the pinned `torch` wheel (its CUDA build, which also
# runs on machines without a GPU) in a virtual environment, and hpctrain built against it with
# -DHPCTRAIN_WITH_CUDA=ON. Idempotent; extra arguments go to cmake --build.
#   HPCTRAIN_TORCH2_VENV  the virtual environment (default .venv-torch2 in the repository)
#   HPCTRAIN_BUILD_DIR    the build folder (default build-torch2)
#   HPCTRAIN_PYTHON       the interpreter that makes the environment (default python3)
#   CUDA_HOME             the CUDA toolkit that find_package(Torch) needs (default /usr/local/cuda, or nvcc on PATH)
set -euo pipefail
cd "$(dirname "$0")/.."
# Pinned: torch 2.15.0 is built with CUDA 13.2 and the C++11 ABI (as Debian's Boost and fmt are).
torch_version=2.15.0
tensorboard_version=2.21.0  # mpi.train.tensorboard reads its event files with TensorBoard itself
transformers_version=5.24.0  # mpi.train.causal_lm loads final/ with transformers and compares its loss
peft_version=0.21.2  # mpi.train.lora_peft loads hpctrain's adapters with peft and trains one for hpctrain to load
bitsandbytes_version=0.50.2  # mpi.train.qlora_peft: the 4-bit base hpctrain's QLoRA is bit-exact with (CPU backend)
h5py_version=3.15.1
venv=${HPCTRAIN_TORCH2_VENV:-.venv-torch2}
python=${HPCTRAIN_PYTHON:-python3}

scripts/install-deps.sh build
if [[ ! -x "$venv/bin/python" ]]; then
  "$python" -m venv "$venv" || { echo "setup-torch2: '$python -m venv' failed (Debian: apt-get install python3-venv)" >&2; exit 1; }
fi
have=$("$venv/bin/python" -c 'import torch; print(torch.__version__.split("+")[0])' 2>/dev/null || true)
if [[ "$have" != "$torch_version" ]]; then
  echo "setup-torch2: installing torch==$torch_version into $venv (about 5 GB with its CUDA libraries)"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check "torch==$torch_version"
fi
"$venv/bin/python" -c 'import tensorboard' 2>/dev/null \
  || "$venv/bin/python" -m pip install -q --disable-pip-version-check "tensorboard==$tensorboard_version"
have=$("$venv/bin/python" -c 'import transformers, h5py; print(transformers.__version__)' 2>/dev/null || true)
[[ "$have" == "$transformers_version" ]] \
  || "$venv/bin/python" -m pip install -q --disable-pip-version-check "transformers==$transformers_version" "h5py==$h5py_version"
have=$("$venv/bin/python" -c 'import peft; print(peft.__version__)' 2>/dev/null || true)
[[ "$have" == "$peft_version" ]] \
  || "$venv/bin/python" -m pip install -q --disable-pip-version-check "peft==$peft_version"
have=$("$venv/bin/python" -c 'import bitsandbytes; print(bitsandbytes.__version__)' 2>/dev/null || true)
[[ "$have" == "$bitsandbytes_version" ]] \
  || "$venv/bin/python" -m pip install -q --disable-pip-version-check "bitsandbytes==$bitsandbytes_version"
torch_dir=$("$venv/bin/python" -c 'import os, torch; print(os.path.dirname(torch.__file__))' 2>/dev/null)

cuda_home=${CUDA_HOME:-}
if [[ -z "$cuda_home" ]]; then
  if [[ -x /usr/local/cuda/bin/nvcc ]]; then cuda_home=/usr/local/cuda
  elif command -v nvcc >/dev/null; then cuda_home=$(dirname "$(dirname "$(command -v nvcc)")")
  else echo "setup-torch2: no CUDA toolkit (nvcc) found; LibTorch's CMake files need one. Set CUDA_HOME" >&2; exit 1
  fi
fi
# The torch folder itself comes first in the prefix path, so that its lib/ is found before a system
# LibTorch (Debian's libtorch-dev) with the same library names.
export HPCTRAIN_BUILD_DIR=${HPCTRAIN_BUILD_DIR:-build-torch2}
export TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-9.0}  # Hopper (H100/H200); list more for other GPUs
export HPCTRAIN_CMAKE_ARGS="-DCMAKE_PREFIX_PATH=$torch_dir;$torch_dir/share/cmake -DHPCTRAIN_WITH_CUDA=ON
  -DCUDAToolkit_ROOT=$cuda_home -DCMAKE_CUDA_COMPILER=$cuda_home/bin/nvcc ${HPCTRAIN_CMAKE_ARGS:-}"
scripts/build.sh "$@"
