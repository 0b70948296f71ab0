#!/usr/bin/env bash
# Issue 33's packing benchmark: training tokens/s (real tokens only, metrics.jsonl's `tokens`: attention mask 1) on
# rows packed from whole documents (`prep lm --packing bfd --max-length 512`) against one row per document
# (`--packing none --max-length 512`, dynamic padding to the batch's longest row), on Debian's fortunes (every
# fortune of `fortunes` and `fortunes-min`: scripts/fortunes_to_jsonl.py --categories all; many short documents and a
# long tail), tokenized with data/fortunes-bpe. Both on 2 ranks (mpirun), 1 thread per rank, fp32, the GPT-2 of
# data/lm-example/gpt2.json (2.76 M parameters), AdamW; the same real tokens per step: PACKED_BATCH rows per rank
# packed, and per rank unpacked the number of documents holding as many tokens on average (the files' mean row
# lengths). A run: WARMUP steps, then STEPS timed steps; tokens/s = the timed steps' real tokens / their summed step
# time. The two runs of a round are interleaved (their order flips every round), ROUNDS rounds; the table gives
# the median and min-max over the rounds and each round's ratio. Also prints the fill of both files (prep's figure:
# tokens / (rows x 512)). Builds nothing.
# Usage: bench/packing/run.sh [BUILD_DIR=build] [ROUNDS=3] [STEPS=10] [WARMUP=2]
# Environment: PACKED_BATCH (default 4), MODEL (default data/lm-example/gpt2.json), RESULTS (a JSON-lines file to keep
# the runs in and append to).
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
rounds=${2:-3}
steps=${3:-10}
warmup=${4:-2}
packed_batch=${PACKED_BATCH:-4}
model=${MODEL:-data/lm-example/gpt2.json}
# shellcheck source=../machine.sh
source bench/machine.sh
bench_workspace packing "$build"
[[ -d /usr/share/games/fortunes ]] || { echo "error: Debian's fortunes are missing: apt-get install fortunes fortunes-min" >&2; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
mpirun=(mpirun --oversubscribe --bind-to none -np 2)

python3 scripts/fortunes_to_jsonl.py --categories all --output "$work/fortunes.jsonl" >/dev/null
for packing in bfd none; do
  "$hpctrain" prep lm --input "$work/fortunes.jsonl" --text-field text --tokenizer data/fortunes-bpe --packing $packing \
    --max-length 512 --seed 1 --no-progress --output "$work/$packing.h5" >"$work/prep-$packing.log" 2>&1 ||
    { cat "$work/prep-$packing.log" >&2; exit 1; }
  grep -E "train:|cut" "$work/prep-$packing.log" | sed "s/^/$packing: /"
done
# Per rank: packed_batch rows, or the documents holding as many real tokens on average (prep's "-> R rows (T tokens)").
mean_row() { sed -n 's/.*train: .* -> \([0-9]*\) rows (\([0-9]*\) tokens).*/\2 \1/p' "$work/prep-$1.log" | awk '{print $1 / $2}'; }
none_batch=$(awk -v b="$packed_batch" -v p="$(mean_row bfd)" -v n="$(mean_row none)" 'BEGIN {printf "%d", b * p / n + 0.5}')
echo "batch per rank: bfd $packed_batch rows, none $none_batch documents (the same real tokens per step on average)"

# run PACKING BATCH ROUND: one training run, its result line appended to $results.
run() {
  local packing=$1 batch=$2 round=$3 out=$work/run
  rm -rf "$out"
  "${mpirun[@]}" "$hpctrain" train --data "$work/$packing.h5" --model-config "$model" --tokenizer data/fortunes-bpe \
    --output "$out" --max-steps $((warmup + steps)) --batch-size "$batch" --threads 1 --lr 1e-3 --logging-steps 1 \
    --eval-steps 100000 --report-to none --no-progress --peak-tflops 1 --seed "$round" >"$work/train.log" 2>&1 ||
    { tail -20 "$work/train.log" >&2; return 1; }
  python3 - "$out/metrics.jsonl" "$warmup" "$packing" "$batch" "$round" >>"$results" <<'PY'
import json, sys
path, warmup, packing, batch, round_ = sys.argv[1:]
steps = [e for e in map(json.loads, open(path)) if "tokens" in e and e["step"] > int(warmup)]
seconds = sum(e["time"]["step"] for e in steps)
tokens = sum(e["tokens"] for e in steps)
print(json.dumps({"packing": packing, "batch": int(batch), "round": int(round_), "steps": len(steps),
                  "tokens_per_step": tokens / len(steps), "tokens_per_second": tokens / seconds}))
PY
  tail -1 "$results"
}

for round in $(seq 1 "$rounds"); do
  echo "round $round of $rounds: $(date -u +%H:%M:%S) UTC, load average $(cut -d' ' -f1-3 /proc/loadavg)"
  if (( round % 2 == 1 )); then
    run bfd "$packed_batch" "$round" && run none "$none_batch" "$round"
  else
    run none "$none_batch" "$round" && run bfd "$packed_batch" "$round"
  fi
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg) ($(date -u +%H:%M:%S) UTC)"
python3 - "$results" <<'PY'
import json, sys
from statistics import median
runs = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
def cell(values, fmt="{:.0f}"):
    text = fmt.format(median(values))
    return text if len(values) < 2 else f"{text} ({fmt.format(min(values))}-{fmt.format(max(values))})"
by = {p: {r["round"]: r for r in runs if r["packing"] == p} for p in ("bfd", "none")}
rounds = sorted(set(by["bfd"]) & set(by["none"]))
ratios = [by["bfd"][k]["tokens_per_second"] / by["none"][k]["tokens_per_second"] for k in rounds]
print("| packing | batch per rank | real tokens per step | tokens/s, median (min-max) |")
print("|---|---:|---:|---:|")
for p in ("bfd", "none"):
    rs = list(by[p].values())
    print(f"| {p} | {rs[0]['batch']} | {cell([r['tokens_per_step'] for r in rs])} | {cell([r['tokens_per_second'] for r in rs])} |")
print(f"\nbfd / none, per round: {cell(ratios, '{:.2f}')}x over {len(rounds)} rounds (goal >= 1.8x: "
      f"{'met' if ratios and median(ratios) >= 1.8 else 'missed'} by the median, "
      f"{'met' if ratios and min(ratios) >= 1.8 else 'missed'} in every round)")
PY
