#!/usr/bin/env bash
# Model benchmark: forward + backward step time of the DistilBERT benchmark model (dim 256, 4 layers, 4 heads,
# ffn 1024, vocab 30522, sequence 128, batch 16, 2 labels) and of the CNN (conv 32 -> conv 64 -> fc 128 -> 10 on
# 28x28x1, batch 64), hpctrain (bench_models) against the same models in PyTorch eager (torch_models.py on
# /usr/bin/python3), same thread count, on 1 thread and on all cores, back to back. Median step after warm-up.
# Builds nothing. Usage: bench/models/run.sh BUILD_DIR [THREADS...]   (default: 1 and $(nproc))
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

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
for model in distilbert cnn; do
  if [[ $model == distilbert ]]; then steps=10 warmup=2; else steps=30 warmup=5; fi
  for threads in "${thread_counts[@]}"; do
    common=(--model "$model" --threads "$threads" --steps "$steps" --warmup "$warmup")
    "$bench_bin" "${common[@]}" >> "$work/results.jsonl"
    "$python" "$here/torch_models.py" "${common[@]}" >> "$work/results.jsonl"
  done
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"

"$python" - "$work/results.jsonl" <<'PY'
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
ours = [r for r in rows if r["impl"] == "hpctrain"]
peer = {(r["model"], r["threads"]): r for r in rows if r["impl"] != "hpctrain"}
print(f"peer: {next(r['impl'] for r in rows if r['impl'] != 'hpctrain')} eager; median of the steps after warm-up")
print("| model | threads | hpctrain ms/step | PyTorch ms/step | hpctrain samples/s | PyTorch samples/s | ratio (PyTorch / hpctrain time) |")
print("|---|---:|---:|---:|---:|---:|---:|")
for r in ours:
    p = peer[(r["model"], r["threads"])]
    print(f"| {r['model']} | {r['threads']} | {r['median_s'] * 1e3:.1f} | {p['median_s'] * 1e3:.1f} | "
          f"{r['samples_per_s']:.1f} | {p['samples_per_s']:.1f} | {p['median_s'] / r['median_s']:.2f} |")
PY
