#!/usr/bin/env bash
# Issue 9's table of the efficient-training techniques: hpctrain (bench_train) against PyTorch DDP on gloo with
# the same technique (bench/ddp/torch_ddp.py: torch.autocast bf16, torch.utils.checkpoint, no_sync()
# accumulation, PeriodicModelAverager local SGD), DistilBERT-style benchmark model (dim 256, 4 layers, batch 16 x
# 128 tokens per rank and micro-batch), 1 thread per rank, AdamW, every step reduces gradients (--sync on).
# Rows: fp32, bf16, bf16 + checkpointing, accumulation x4 (fp32), local SGD K = 8 (fp32); each at 1 and 2 ranks,
# hpctrain then torch, one run per line, the whole matrix repeated ROUNDS times (interleaved). Then the goal rows:
# checkpointing at seq 512 batch 16 (hpctrain fp32, on/off, 1 rank) and fp32 with the BLAS fix (OPENBLAS_CORETYPE
# unset) against forced generic Prescott kernels (hpctrain, 1 rank), interleaved too. Samples/s come from the mean
# step (local SGD's every-8th average included); memory from one more micro-batch (bench_train's header).
# OPENBLAS_CORETYPE is unset for every hpctrain run so that its BLAS fix acts (Note [BLAS kernels]); the torch
# wheel multiplies on MKL, which ignores it. Builds nothing.
# Usage: bench/efficient/run.sh [BUILD_DIR=build] [ROUNDS=2]
# (PYTHON: the torch peer's interpreter, default .venv-torch2/bin/python of scripts/setup-torch2.sh; RESULTS: a JSON-lines file to keep
# the runs in and append to.)
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
rounds=${2:-2}
python=${PYTHON:-.venv-torch2/bin/python}  # scripts/setup-torch2.sh makes this venv
bench_bin=$build/bench/bench_train
[[ -x $bench_bin ]] || { echo "error: $bench_bin not found; build it: scripts/build.sh --target bench_train" >&2; exit 1; }
"$python" -c 'import torch.distributed' 2>/dev/null || { echo "error: $python cannot import torch (set PYTHON)" >&2; exit 1; }
# shellcheck source=../machine.sh
source bench/machine.sh
print_machine  # before OMP_NUM_THREADS is set: nproc counts it
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
mpirun=(mpirun --oversubscribe --bind-to none)
kernels() { "$@" "$bench_bin" --steps 1 --warmup 0 --sync on 2>&1 | grep -i '^core:' | tail -1 || echo unknown; }
echo "openblas kernels (OPENBLAS_VERBOSE=2): hpctrain with OPENBLAS_CORETYPE unset: $(kernels env -u OPENBLAS_CORETYPE \
  OPENBLAS_VERBOSE=2); as this environment sets it (${OPENBLAS_CORETYPE:-unset}): $(kernels env OPENBLAS_VERBOSE=2)"
echo "running alongside:"
pgrep -a 'hpctrain|bench_|ninja|cc1plus|ctest|python' | cut -c1-120 | sed 's/^/  /' || echo "  nothing matching"
declare -A rows=(
  [fp32]="--steps 4 --warmup 1"
  [bf16]="--steps 4 --warmup 1 --mixed-precision bf16"
  [bf16+ckpt]="--steps 4 --warmup 1 --mixed-precision bf16 --gradient-checkpointing on"
  [accum4]="--steps 2 --warmup 1 --accumulation 4"
  [localsgd8]="--steps 8 --warmup 1 --local-sgd-steps 8"
)
order=(fp32 bf16 bf16+ckpt accum4 localsgd8)
if [[ -n ${RESULTS:-} ]]; then
  results=$RESULTS  # kept, and appended to: rounds of several invocations summarized together
else
  results=$(mktemp)
  trap 'rm -f "$results"' EXIT
fi
port=29611
# Prints and keeps one result line: ROW LABEL COMMAND...
one_run() {
  local row=$1
  shift
  local line
  line=$("$@" 2>/dev/null | grep '^{' | tail -1) || true
  [[ -n $line ]] || { echo "error: no result from: $*" >&2; return 1; }
  echo "{\"row\": \"$row\", \"result\": $line}" >>"$results"
  echo "$line" | python3 -c "import json, sys; r = json.load(sys.stdin); o = r['on']; m = r['memory']; print(f\"$row \
{r['impl'][:16]:16} ranks {r['ranks']}: step {o['mean_s']:.3f} s, {o['samples_per_s_mean']:.1f} samples/s, \
peak RSS {m['peak_rss_bytes'] / 2**20:.0f} MiB, activations peak {m['activation_peak_bytes'] / 2**20:.1f} MiB \
kept {m['activation_kept_bytes'] / 2**20:.1f} MiB\")"
}
for round in $(seq "$rounds"); do
  echo "round $round ($(cut -d' ' -f1-3 /proc/loadavg))"
  for row in "${order[@]}"; do
    for np in 1 2; do
      read -r -a args <<<"${rows[$row]} --sync on --threads 1"
      one_run "$row" env -u OPENBLAS_CORETYPE "${mpirun[@]}" -np "$np" "$bench_bin" "${args[@]}"
      port=$((port + 1))
      one_run "$row" "${mpirun[@]}" -np "$np" "$python" bench/ddp/torch_ddp.py "${args[@]}" --port "$port"
    done
  done
  for ckpt in off on; do
    one_run "seq512-ckpt-$ckpt" env -u OPENBLAS_CORETYPE "${mpirun[@]}" -np 1 "$bench_bin" --steps 3 --warmup 1 \
      --sync on --threads 1 --seq-length 512 --batch 16 --gradient-checkpointing "$ckpt"
  done
  for core in fixed Prescott; do
    if [[ $core == fixed ]]; then blas=(env -u OPENBLAS_CORETYPE); else blas=(env OPENBLAS_CORETYPE=Prescott); fi
    one_run "blas-$core" "${blas[@]}" "${mpirun[@]}" -np 1 "$bench_bin" --steps 4 --warmup 1 --sync on --threads 1
  done
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 bench/efficient/summary.py "$results" "${order[@]}"
