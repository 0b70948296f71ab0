#!/usr/bin/env bash
# Data-parallel training benchmark: hpctrain (bench_train) against PyTorch DDP on gloo (torch_ddp.py on
# /usr/bin/python3), both launched by mpirun, on the benchmark models of bench/models (DistilBERT-style batch 16
# x 128 tokens per rank; CNN batch 64 per rank), 1 and 2 ranks, THREADS CPU threads per rank (default 1), back to
# back in one run. Each run alternates steps with gradients exchanged (sync on) and never exchanged (sync off,
# DDP's no_sync()), each step starting from a barrier and timed as its slowest rank's; exposed communication
# share = 1 - time(sync off) / time(sync on) within the run, for both sides alike. The whole matrix is repeated
# REPEATS times, interleaved (machine noise hits both sides alike); each figure is the median over the repeats.
# Builds nothing. Usage: bench/ddp/run.sh BUILD_DIR [THREADS=1] [REPEATS=3] [STEPS_DISTILBERT=10] [STEPS_CNN=30]
set -euo pipefail

if [[ $# -lt 1 ]]; then
  echo "usage: $0 BUILD_DIR [THREADS=1] [REPEATS=3] [STEPS_DISTILBERT=10] [STEPS_CNN=30]" \
       "(build first: cmake --build BUILD_DIR --target bench_train)" >&2
  exit 2
fi
build_dir=$1
threads=${2:-1}
repeats=${3:-3}
steps_distilbert=${4:-10}
steps_cnn=${5:-30}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
bench_bin=$build_dir/bench/bench_train
python=${PYTHON:-/usr/bin/python3}
[[ -x $bench_bin ]] || { echo "error: $bench_bin not found; build it: cmake --build $build_dir --target bench_train" >&2; exit 1; }
"$python" -c 'import torch.distributed' 2>/dev/null || { echo "error: $python cannot import torch (apt-get install python3-torch)" >&2; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=$threads
mpirun=(mpirun --oversubscribe --bind-to none)

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# shellcheck source=../machine.sh
source "$(dirname "${BASH_SOURCE[0]}")/../machine.sh"
print_machine
port=29533
for ((repeat = 0; repeat < repeats; repeat++)); do
for model in distilbert cnn; do
  if [[ $model == distilbert ]]; then steps=$steps_distilbert warmup=2; else steps=$steps_cnn warmup=5; fi
  for ranks in 1 2; do
    common=(--model "$model" --threads "$threads" --steps "$steps" --warmup "$warmup" --sync alternate)
    "${mpirun[@]}" -np "$ranks" "$bench_bin" "${common[@]}" >> "$work/results.jsonl"
    port=$((port + 1))
    "${mpirun[@]}" -np "$ranks" "$python" "$here/torch_ddp.py" "${common[@]}" --port "$port" >> "$work/results.jsonl"
  done
done
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"

"$python" - "$work/results.jsonl" <<'PY'
import json, sys
from statistics import median
rows = [json.loads(line) for line in open(sys.argv[1]) if line.startswith("{")]
runs = {}
for r in rows:
    runs.setdefault((r["impl"] == "hpctrain", r["model"], r["ranks"]), []).append(r)
peer = next(r["impl"] for r in rows if r["impl"] != "hpctrain")
repeats = len(next(iter(runs.values())))


def figure(mine, model, ranks, value):  # median over the repeats of value(run)
    return median(value(r) for r in runs[(mine, model, ranks)])


def throughput(mine, model, ranks, sync="on"):
    return figure(mine, model, ranks, lambda r: r[sync]["samples_per_s"])


def exposed(r):
    return 1 - r["off"]["median_s"] / r["on"]["median_s"]


print(f"peer: {peer}; threads per rank: {rows[0]['threads']}; per run the median step (each step the slowest "
      f"rank's, from a barrier), then the median of {repeats} interleaved runs")
print("| model | ranks | hpctrain samples/s | PyTorch DDP samples/s | ratio | hpctrain scaling | DDP scaling "
      "| hpctrain exposed comm | DDP exposed comm | hpctrain reducer-measured exposed | compute-only scaling (hpctrain) "
      "| hpctrain step ms (min-max over runs) | DDP step ms (min-max) |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for model in ("distilbert", "cnn"):
    for ranks in (1, 2):
        ours, theirs = throughput(True, model, ranks), throughput(False, model, ranks)
        cells = [model, str(ranks), f"{ours:.1f}", f"{theirs:.1f}", f"{ours / theirs:.2f}"]
        for mine in (True, False):
            cells.append(f"{throughput(mine, model, ranks) / (ranks * throughput(mine, model, 1)):.0%}")
        for mine in (True, False):
            cells.append(f"{figure(mine, model, ranks, exposed):.1%}")
        cells.append(f"{figure(True, model, ranks, lambda r: r['on']['reducer_exposed_s'] / r['on']['median_s']):.1%}")
        cells.append(f"{throughput(True, model, ranks, 'off') / (ranks * throughput(True, model, 1, 'off')):.0%}")
        for mine in (True, False):
            steps = sorted(r["on"]["median_s"] * 1e3 for r in runs[(mine, model, ranks)])
            cells.append(f"{median(steps):.1f} ({steps[0]:.1f}-{steps[-1]:.1f})")
        print("| " + " | ".join(cells) + " |")
PY
