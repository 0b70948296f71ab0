#!/usr/bin/env bash
# bf16 vs fp32 step time of the DistilBERT-style benchmark model (bench/models/benchmark_models.hpp) at 1 and
# 2 ranks, interleaved rounds (bench_train --sync on: every step reduces gradients), then which oneDNN kernels
# the bf16 products ran on (ONEDNN_VERBOSE=1). Usage: bench/efficient/precision.sh [BUILD_DIR=build] [ROUNDS=2]
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
rounds=${2:-2}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# shellcheck source=../machine.sh
source bench/machine.sh
print_machine
for round in $(seq "$rounds"); do
  for np in 1 2; do
    for mp in no bf16; do
      mpirun --oversubscribe --bind-to none -np "$np" "$build/bench/bench_train" --model distilbert --threads 1 \
        --steps 6 --warmup 2 --sync on --mixed-precision "$mp" 2>/dev/null | tail -1 |
        python3 -c "import json, sys; e = json.load(sys.stdin); o = e['on']; print(f\"round $round ranks {e['ranks']} \
{e['mixed_precision']:>4}: step {o['median_s']:.3f} s (forward {o['forward_s']:.3f}, backward {o['backward_s']:.3f}), \
{o['samples_per_s']:.1f} samples/s\")"
    done
  done
done
echo "oneDNN primitives of one bf16 step (count, kind, implementation):"
ONEDNN_VERBOSE=1 mpirun --oversubscribe --bind-to none -np 1 -x ONEDNN_VERBOSE "$build/bench/bench_train" --model distilbert \
  --threads 1 --steps 1 --warmup 0 --sync on --mixed-precision bf16 2>&1 | grep ',exec,' | cut -d, -f4,5 | sort | uniq -c
