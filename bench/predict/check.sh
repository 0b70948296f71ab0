#!/usr/bin/env bash
# The scaling predictor against a measured 2-rank step on this machine (bench/README.md, "Scaling predictor").
# 1. `mpirun -np 2 hpctrain bench comm --json`: the α-β of this launch;
#    fitted to the sizes from 16 MiB up (all buckets but the first 1 MiB are ~25 MiB, past the cache cliff here);
# 2. REPEATS times, back to back: `hpctrain bench predict` measures one rank's step (the DistilBERT benchmark
#    model, batch 16 x 128 tokens, 1 thread, AdamW) and predicts 2 ranks — once alone ("solo") and once with a
#    twin measuring at the same time ("paired": the two ranks of the job share this VM's 2 cores and its memory
#    bandwidth, which the model's "compute does not change with the rank count" leaves out) —; then
#    `mpirun -np 2 bench_train --sync on` measures the 2-rank step (the slowest rank's, median of STEPS after 2
#    warm-up);
# 3. one line per repeat and the medians of predicted / measured. Prints the load average before each repeat.
# Usage: bench/predict/check.sh BUILD_DIR [REPEATS=3] [STEPS=6]   (build: hpctrain and bench_train)
set -euo pipefail
build=${1:?usage: $0 BUILD_DIR [REPEATS=3] [STEPS=6]}
repeats=${2:-3}
steps=${3:-6}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
mpirun=(mpirun --oversubscribe --bind-to none -np 2)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"${mpirun[@]}" "$build/hpctrain" bench comm --fit-min-size 16MiB --json >"$work/comm.json"
"${mpirun[@]}" "$build/hpctrain" bench comm --fit-min-size 16MiB   # the table, for the record
for r in $(seq "$repeats"); do
  echo "repeat $r: load average $(cut -d' ' -f1-3 /proc/loadavg)"
  predict=("$build/hpctrain" bench predict --model-config "$here/distilbert-bench.json" --batch-size 16
           --sequence-length 128 --threads 1 --steps "$steps" --warmup 2 --comm-json "$work/comm.json" --gpus-per-node 2
           --json)
  "${predict[@]}" >"$work/predict.$r.json"
  "${predict[@]}" >"$work/paired.$r.json" & "${predict[@]}" >/dev/null; wait
  "${mpirun[@]}" "$build/bench/bench_train" --model distilbert --threads 1 --steps "$steps" --warmup 2 --sync on \
    >"$work/train.$r.json"
done
python3 - "$work" "$repeats" <<'PY'
import json, statistics, sys
work, repeats = sys.argv[1], int(sys.argv[2])
ratios = {"solo": [], "paired": []}
print("| repeat | 1-rank step ms fwd / bwd / opt (solo; paired) | predicted 2-rank step ms, solo (exposed comm) | "
      "predicted, paired | measured 2-rank step ms (min) | predicted / measured (solo; paired) |")
print("|---:|---|---:|---:|---:|---:|")
def phases(p):
    s = p["step"]
    return f"{1e3*s['forward_s']:.0f} / {1e3*s['backward_s']:.0f} / {1e3*s['optimizer_s']:.1f}"
for r in range(1, repeats + 1):
    solo, paired = (json.load(open(f"{work}/{kind}.{r}.json")) for kind in ("predict", "paired"))
    t = json.loads(open(f"{work}/train.{r}.json").read().strip().splitlines()[-1])
    measured = t["on"]["median_s"]
    a, b = solo["predictions"][0], paired["predictions"][0]
    ratios["solo"].append(a["step_s"] / measured)
    ratios["paired"].append(b["step_s"] / measured)
    print(f"| {r} | {phases(solo)}; {phases(paired)} | {1e3*a['step_s']:.0f} ({1e3*a['exposed_comm_s']:.1f}) | "
          f"{1e3*b['step_s']:.0f} | {1e3*measured:.0f} ({1e3*t['on']['min_s']:.0f}) | "
          f"{ratios['solo'][-1]:.2f}; {ratios['paired'][-1]:.2f} |")
for kind, values in ratios.items():
    print(f"median predicted / measured ({kind}): {statistics.median(values):.2f}")
PY
