#!/usr/bin/env bash
# Optimizer benchmark: step time (ns per parameter) and state bytes of each optimizer on the parameters of the
# DistilBERT benchmark model (11.2 M) and of a DistilBERT-base-shaped model (dim 768, 6 layers: 67 M), hpctrain
# (bench_optim, through make_optimizer) against its peer in the same run (torch_optim.py: torch.optim.AdamW
# foreach, torch.optim.SGD, transformers' Adafactor, bitsandbytes' AdamW8bit), same thread count, one model
# and thread count at a time, the two sides back to back. The whole matrix runs REPEATS times (default 3);
# each figure is the median run with the min-max. Builds nothing.
# Usage: [REPEATS=3] [PYTHON=.venv-torch2/bin/python] bench/optim/run.sh BUILD_DIR [THREADS...]  (default: 1)
set -euo pipefail

usage="usage: $0 BUILD_DIR [THREADS...]   (build first: cmake --build BUILD_DIR --target bench_optim)"
build_dir=${1:?$usage}
shift
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
python=${PYTHON:-$here/../../.venv-torch2/bin/python}  # scripts/setup-torch2.sh makes this venv
[[ -x $build_dir/bench/bench_optim ]] || { echo "error: no $build_dir/bench/bench_optim; $usage" >&2; exit 1; }
"$python" -c 'import torch' 2>/dev/null || { echo "error: $python cannot import torch (set PYTHON)" >&2; exit 1; }
thread_counts=("$@")
[[ ${#thread_counts[@]} -gt 0 ]] || thread_counts=(1)

# shellcheck source=../machine.sh
source "$here/../machine.sh"
print_machine
"$python" - <<'PY'
import importlib
for name in ["torch", "transformers", "bitsandbytes"]:
    try:
        print(f"peer {name} {importlib.import_module(name).__version__}")
    except Exception as error:  # noqa: BLE001 - a missing peer is reported, not fatal
        print(f"peer {name} missing ({type(error).__name__}: {error})")
PY
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
repeats=${REPEATS:-3}
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
for ((repeat = 0; repeat < repeats; repeat++)); do
  for model in distilbert distilbert-base; do
    if [[ $model == distilbert ]]; then steps=10; else steps=5; fi
    for threads in "${thread_counts[@]}"; do
      common=(--model "$model" --threads "$threads" --steps "$steps" --warmup 2)
      "$build_dir/bench/bench_optim" "${common[@]}" >> "$work/results.jsonl"
      "$python" "$here/torch_optim.py" "${common[@]}" 2> "$work/peer.err" >> "$work/results.jsonl" ||
        { cat "$work/peer.err" >&2; exit 1; }
    done
  done
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
"$python" "$here/report.py" "$work/results.jsonl"
