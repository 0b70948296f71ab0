#!/usr/bin/env bash
# Model benchmark: forward + backward step time of the DistilBERT benchmark model (dim 256, 4 layers, 4 heads,
# ffn 1024, vocab 30522, sequence 128, batch 16, 2 labels) and of the CNN (conv 32 -> conv 64 -> fc 128 -> 10 on
# 28x28x1, batch 64), hpctrain (bench_models) against the same models in PyTorch eager (torch_models.py on
# /usr/bin/python3), same thread count, on 1 thread and on all cores, back to back. Median step after warm-up;
# the whole matrix runs REPEATS times (environment, default 3), interleaved, and each figure is the median run.
# Builds nothing. Usage: [REPEATS=3] bench/models/run.sh BUILD_DIR [THREADS...]   (default: 1 and $(nproc))
set -euo pipefail

if [[ $# -lt 1 ]]; then
  echo "usage: $0 BUILD_DIR [THREADS...]   (build first: cmake --build BUILD_DIR --target bench_models)" >&2
  exit 2
fi
build_dir=$1
shift
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
bench_bin=$build_dir/bench/bench_models
python=${PYTHON:-/usr/bin/python3}
[[ -x $bench_bin ]] || { echo "error: $bench_bin not found; build it: cmake --build $build_dir --target bench_models" >&2; exit 1; }
"$python" -c 'import torch' 2>/dev/null || { echo "error: $python cannot import torch (apt-get install python3-torch)" >&2; exit 1; }

if [[ $# -gt 0 ]]; then
  thread_counts=("$@")
else
  cores=$(nproc)
  thread_counts=(1)
  [[ $cores -gt 1 ]] && thread_counts+=("$cores")
fi

# shellcheck source=../machine.sh
source "$here/../machine.sh"
print_machine
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
repeats=${REPEATS:-3}
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
for ((repeat = 0; repeat < repeats; repeat++)); do
for model in distilbert cnn; do
  if [[ $model == distilbert ]]; then steps=10 warmup=2; else steps=30 warmup=5; fi
  for threads in "${thread_counts[@]}"; do
    common=(--model "$model" --threads "$threads" --steps "$steps" --warmup "$warmup")
    "$bench_bin" "${common[@]}" >> "$work/results.jsonl"
    "$python" "$here/torch_models.py" "${common[@]}" >> "$work/results.jsonl"
  done
done
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"

"$python" - "$work/results.jsonl" <<'PY'
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
runs = {}
for r in rows:
    runs.setdefault((r["impl"] == "hpctrain", r["model"], r["threads"]), []).append(r["median_s"])
def median(values):
    values = sorted(values)
    return values[len(values) // 2] if len(values) % 2 else (values[len(values) // 2 - 1] + values[len(values) // 2]) / 2
n = len(next(iter(runs.values())))
print(f"peer: {next(r['impl'] for r in rows if r['impl'] != 'hpctrain')} eager; per run the median of the steps after "
      f"warm-up, then the median (min-max) of {n} interleaved runs")
print("| model | threads | hpctrain ms/step | PyTorch ms/step | hpctrain samples/s | PyTorch samples/s | ratio (PyTorch / hpctrain time) | ratio per run |")
print("|---|---:|---:|---:|---:|---:|---:|---|")
batch = {"distilbert": 16, "cnn": 64}
for (mine, model, threads), ours in runs.items():
    if not mine:
        continue
    theirs = runs[(False, model, threads)]
    o, t = median(ours), median(theirs)
    per_run = ", ".join(f"{b / a:.2f}" for a, b in zip(ours, theirs))
    print(f"| {model} | {threads} | {o * 1e3:.1f} ({min(ours) * 1e3:.0f}-{max(ours) * 1e3:.0f}) | "
          f"{t * 1e3:.1f} ({min(theirs) * 1e3:.0f}-{max(theirs) * 1e3:.0f}) | {batch[model] / o:.1f} | "
          f"{batch[model] / t:.1f} | {t / o:.2f} | {per_run} |")
PY
