#!/usr/bin/env bash
# Data-parallel training benchmark: hpctrain (bench_train) against PyTorch DDP on gloo (torch_ddp.py on
# /usr/bin/python3), both launched by mpirun, on the benchmark models of bench/models (DistilBERT-style batch 16
# x 128 tokens per rank; CNN batch 64 per rank), 1 and 2 ranks, THREADS CPU threads per rank (default 1), back to
# back in one run. Each configuration runs twice: gradients exchanged (sync on) and never exchanged (sync off,
# DDP's no_sync()); exposed communication share = 1 - time(sync off) / time(sync on), for both sides alike.
# The whole matrix is repeated REPEATS times, interleaved (machine noise hits both sides alike); each figure
# is the median over the repeats of the per-run median step time.
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
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
port=29533
for ((repeat = 0; repeat < repeats; repeat++)); do
for model in distilbert cnn; do
  if [[ $model == distilbert ]]; then steps=$steps_distilbert warmup=2; else steps=$steps_cnn warmup=5; fi
  for ranks in 1 2; do
    for sync in on off; do
      common=(--model "$model" --threads "$threads" --steps "$steps" --warmup "$warmup" --sync "$sync")
      "${mpirun[@]}" -np "$ranks" "$bench_bin" "${common[@]}" >> "$work/results.jsonl"
      port=$((port + 1))
      "${mpirun[@]}" -np "$ranks" "$python" "$here/torch_ddp.py" "${common[@]}" --port "$port" >> "$work/results.jsonl"
    done
  done
done
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"

"$python" - "$work/results.jsonl" <<'PY'
import json, sys
import statistics
rows = [json.loads(line) for line in open(sys.argv[1]) if line.startswith("{")]
runs = {}
for r in rows:
    runs.setdefault((r["impl"] == "hpctrain", r["model"], r["ranks"], r["sync"]), []).append(r)
get = {}
for key, group in runs.items():  # the median run by step time; samples/s and reducer figures follow it
    group = sorted(group, key=lambda r: r["median_s"])
    get[key] = dict(group[len(group) // 2], spread=(group[0]["median_s"], group[-1]["median_s"]))
peer = next(r["impl"] for r in rows if r["impl"] != "hpctrain")
repeats = len(next(iter(runs.values())))
print(f"peer: {peer}; threads per rank: {rows[0]['threads']}; per run the median step of the slowest rank after "
      f"warm-up, then the median of {repeats} interleaved runs")
print("| model | ranks | hpctrain samples/s | PyTorch DDP samples/s | ratio | hpctrain scaling | DDP scaling "
      "| hpctrain exposed comm | DDP exposed comm | hpctrain reducer-measured exposed | compute-only scaling (hpctrain) "
      "| hpctrain step ms (min-max over runs) | DDP step ms (min-max) |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for model in ("distilbert", "cnn"):
    for ranks in (1, 2):
        ours, theirs = get[(True, model, ranks, True)], get[(False, model, ranks, True)]
        cells = [model, str(ranks), f"{ours['samples_per_s']:.1f}", f"{theirs['samples_per_s']:.1f}",
                 f"{ours['samples_per_s'] / theirs['samples_per_s']:.2f}"]
        for mine in (True, False):
            one, this = get[(mine, model, 1, True)], get[(mine, model, ranks, True)]
            cells.append(f"{this['samples_per_s'] / (ranks * one['samples_per_s']):.0%}")
        for mine in (True, False):
            on, off = get[(mine, model, ranks, True)], get[(mine, model, ranks, False)]
            cells.append(f"{1 - off['median_s'] / on['median_s']:.1%}")
        cells.append(f"{ours['reducer_exposed_s'] / ours['median_s']:.1%}")
        off_one, off_this = get[(True, model, 1, False)], get[(True, model, ranks, False)]
        cells.append(f"{off_this['samples_per_s'] / (ranks * off_one['samples_per_s']):.0%}")
        for mine in (True, False):
            r = get[(mine, model, ranks, True)]
            cells.append(f"{r['median_s'] * 1e3:.1f} ({r['spread'][0] * 1e3:.1f}-{r['spread'][1] * 1e3:.1f})")
        print("| " + " | ".join(cells) + " |")
PY
