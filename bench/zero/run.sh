#!/usr/bin/env bash
# Issue 23's ZeRO benchmark: `hpctrain train --zero-stage 0|1|2` (STAGES="0 3": issue 31's stage 3) at 1 and 2
# ranks on the DistilBERT benchmark model
# (bench/predict/distilbert-bench.json, batch 16 x 128 tokens per rank, random words of bert-base-uncased through
# `prep text`, 2 labels) and the GPT-2-style causal LM of bench/lm (gpt2.json, batch 8 x 128 random token ids per
# rank, bench/lm/make_data.py), 1 thread per rank, AdamW (OPTIM), clipping at 1. Per run: every rank's peak RSS (GNU
# time around each rank), optimizer_state_bytes and comm_bytes per step from metrics.jsonl (the steps after WARMUP),
# the median step time; beside it the estimate of `hpctrain estimate-memory --zero-stage S --world-size R`, so that
# the measured saving against stage 0 (peak RSS) is compared with the estimated one. The stages of one model and rank
# count run back to back (0 1 2, reversed every other round): interleaved, each ratio against the same round's
# stage 0. Then the predictor (`hpctrain bench predict --zero-stage S`) for 8 to 64 ranks (8 per node) over a target
# network (LATENCY_US, LINK_GBPS; default 5 us and 200 Gb/s) from the step it measures here. Builds nothing.
# Usage: bench/zero/run.sh [BUILD_DIR=build] [ROUNDS=3] [STEPS=8] [WARMUP=2]
# Environment: MODELS (default "distilbert gpt2"), STAGES ("0 1 2"), RANKS ("1 2"), OPTIM (adamw_torch), RESULTS (a
# JSON-lines file to keep the runs in and append to), PREDICT (0: skip the predictor), PYTHON (with h5py and numpy;
# default /usr/bin/python3).
# A binary without `train --zero-stage` (the core of issue 23 not merged) runs stage 0 only and says so.
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
rounds=${2:-3}
steps=${3:-8}
warmup=${4:-2}
read -r -a models <<<"${MODELS:-distilbert gpt2}"
read -r -a stages <<<"${STAGES:-0 1 2}"
predict_stages=("${stages[@]}")  # the predictor needs no core
read -r -a rank_counts <<<"${RANKS:-1 2}"
optim=${OPTIM:-adamw_torch}
python=${PYTHON:-/usr/bin/python3}  # with h5py and numpy (bench/lm/make_data.py)
# shellcheck source=../machine.sh
source bench/machine.sh
bench_workspace zero "$build"
[[ -x /usr/bin/time ]] || { echo "error: /usr/bin/time (GNU time) is missing: apt-get install time" >&2; exit 1; }
"$python" -c 'import h5py, numpy' 2>/dev/null || { echo "error: $python needs h5py and numpy (set PYTHON)" >&2; exit 1; }
if [[ $("$hpctrain" train --help 2>&1) != *--zero-stage* ]]; then
  echo "note: $hpctrain has no 'train --zero-stage' (issue 23's core is not in this build): stage 0 only"
  stages=(0)
fi

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
mpirun=(mpirun --oversubscribe --bind-to none)
max_ranks=$(printf '%s\n' "${rank_counts[@]}" | sort -n | tail -1)

# The data: enough rows for WARMUP + STEPS steps at the largest rank count.
declare -A batch=([distilbert]=16 [gpt2]=8) config=([distilbert]=bench/predict/distilbert-bench.json [gpt2]=bench/lm/gpt2.json)
"$python" - "$work/rows.jsonl" $(( (warmup + steps) * max_ranks * 16 )) <<'PY'
import json, random, sys
words = [w.strip() for w in open("data/bert-base-uncased/vocab.txt") if w.strip().isalpha()]
random.seed(0)
with open(sys.argv[1], "w") as out:
    for i in range(int(sys.argv[2])):  # about 150 words: truncated to 128 tokens
        out.write(json.dumps({"text": " ".join(random.choices(words, k=150)), "label": "ab"[i % 2]}) + "\n")
PY
"$hpctrain" prep text --input "$work/rows.jsonl" --text-field text --label-field label \
  --tokenizer data/bert-base-uncased --max-length 128 --compression none --no-progress --output "$work/distilbert.h5" \
  >"$work/prep.log" 2>&1 || { cat "$work/prep.log" >&2; exit 1; }
"$python" bench/lm/make_data.py "$work/gpt2.h5" --rows $(( (warmup + steps) * max_ranks * 8 )) --vocab 32000 >/dev/null
echo "running alongside:"
pgrep -a 'hpctrain|bench_|ninja|cc1plus|ctest|python' | cut -c1-120 | sed 's/^/  /' || echo "  nothing matching"

# run_one MODEL RANKS STAGE ROUND: one training run, its result line appended to $results.
run_one() {
  local model=$1 ranks=$2 stage=$3 round=$4 out=$work/run zero=() tokenizer=()
  rm -rf "$out" "$work"/rss.*
  [[ $stage != 0 ]] && zero=(--zero-stage "$stage")
  [[ $model == distilbert ]] && tokenizer=(--tokenizer data/bert-base-uncased)
  # GNU time around every rank: each rank's own peak RSS in rss.RANK.
  "${mpirun[@]}" -np "$ranks" bash -c '/usr/bin/time -f %M -o "$0/rss.$OMPI_COMM_WORLD_RANK" "$@"' "$work" \
    "$hpctrain" train --data "$work/$model.h5" --model-config "${config[$model]}" "${tokenizer[@]}" --output "$out" \
    --max-steps $((warmup + steps)) --batch-size "${batch[$model]}" --threads 1 --optim "$optim" --lr 1e-4 \
    --max-grad-norm 1 --logging-steps 1 --save-steps 100000 --report-to none --no-progress "${zero[@]}" \
    >"$work/train.log" 2>&1 || { tail -20 "$work/train.log" >&2; return 1; }
  "$hpctrain" estimate-memory --model-config "${config[$model]}" --batch-size "${batch[$model]}" --sequence-length 128 \
    --optim "$optim" --zero-stage "$stage" --world-size "$ranks" --json >"$work/estimate.json"
  "$python" bench/zero/summary.py --record "$out/metrics.jsonl" "$work/estimate.json" "$warmup" "$model" "$ranks" \
    "$stage" "$round" "$work"/rss.* >>"$results"
}

for round in $(seq "$rounds"); do
  echo "round $round of $rounds: $(date -u +%H:%M:%S) UTC, load average $(cut -d' ' -f1-3 /proc/loadavg)"
  order=("${stages[@]}")
  (( round % 2 == 0 )) && order=($(printf '%s\n' "${stages[@]}" | tac))
  for model in "${models[@]}"; do
    for ranks in "${rank_counts[@]}"; do
      for stage in "${order[@]}"; do
        run_one "$model" "$ranks" "$stage" "$round"
        tail -1 "$results" | "$python" bench/zero/summary.py --progress -
      done
    done
  done
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg) ($(date -u +%H:%M:%S) UTC)"
"$python" bench/zero/summary.py "$results"

[[ ${PREDICT:-1} == 0 ]] && exit 0
# The predictor for 8..64 ranks (8 per node) over the target network, from one rank's step measured here once per
# model (the stages' rows share it, so that they differ only by the model of the step).
network=(--latency-us "${LATENCY_US:-5}" --link-gbps "${LINK_GBPS:-200}" --nodes 8 --gpus-per-node 8)
for model in "${models[@]}"; do
  shape=(--model-config "${config[$model]}" --batch-size "${batch[$model]}" --sequence-length 128 --optim "$optim")
  read -r forward backward optimizer < <("$hpctrain" bench predict "${shape[@]}" --threads 1 --steps 3 --warmup 1 \
    "${network[@]}" --json | "$python" -c 'import json, sys; s = json.load(sys.stdin)["step"]; \
print(*(f"{1e3 * s[k]:.3f}" for k in ("forward_s", "backward_s", "optimizer_s")))')
  for stage in "${predict_stages[@]}"; do
    echo "bench predict: $model, --zero-stage $stage, ${LATENCY_US:-5} us, ${LINK_GBPS:-200} Gb/s, 8 ranks per node;" \
      "one rank's step measured here: forward $forward, backward $backward, optimizer $optimizer ms"
    "$hpctrain" bench predict "${shape[@]}" --forward-ms "$forward" --backward-ms "$backward" --optimizer-ms "$optimizer" \
      "${network[@]}" --zero-stage "$stage" | sed -n '/nodes  *ranks/,/^assumptions/p' | grep -v '^assumptions'
  done
done
