#!/usr/bin/env bash
# Rows per second of `hpctrain prep sft` against TRL's own preprocessing (SFTTrainer._prepare_dataset: datasets.map
# with apply_chat_template(return_assistant_tokens_mask=True), labels, truncation) on GCIDE conversations
# (scripts/gcide_to_sft.py), with the SFT example's tokenizer and trl's Qwen 2.5 training template
# (data/sft-example/tokenizer), max_length 128. One rank: hpctrain with 1 thread against TRL with num_proc 1, and
# 2 threads against num_proc 2. The two sides alternate, ROUNDS times; the table gives min / median / max.
# Usage: bench/sft/run.sh BUILD_DIR [ROWS=20000] [ROUNDS=3]
# The peer needs transformers, trl and datasets: PEER_PYTHON (default /work/peers/bin/python).
set -euo pipefail
BUILD=$(cd "${1:?build dir}" && pwd)
ROWS=${2:-20000}
ROUNDS=${3:-3}
REPO=$(cd "$(dirname "$0")/../.." && pwd)
PEER_PYTHON=${PEER_PYTHON:-/work/peers/bin/python}
DIR=${BENCH_DIR:-/tmp/hpctrain-bench-sft}
TOKENIZER=$REPO/data/sft-example/tokenizer
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 TOKENIZERS_PARALLELISM=false RAYON_NUM_THREADS=1
# shellcheck source=../machine.sh
source "$REPO/bench/machine.sh"
print_machine
mkdir -p "$DIR"
trap 'rm -rf "$DIR"' EXIT
python3 "$REPO/scripts/gcide_to_sft.py" --rows "$ROWS" --output "$DIR/rows.jsonl" >/dev/null
rows=$(wc -l <"$DIR/rows.jsonl")
echo "commit: $(git -C "$REPO" rev-parse --short HEAD); $rows conversations"

# run_hpctrain THREADS: seconds of one prep sft (wall), its targets checked against the peer's below.
run_hpctrain() {
  local start end
  start=$(date +%s.%N)
  "$BUILD/hpctrain" prep sft --input "$DIR/rows.jsonl" --tokenizer "$TOKENIZER" --max-length 128 --threads "$1" \
    --no-progress --overwrite --compression none --output "$DIR/sft.h5" >"$DIR/hpctrain.log" 2>&1 \
    || { cat "$DIR/hpctrain.log"; exit 1; }
  end=$(date +%s.%N)
  echo "$end - $start" | bc
}
run_trl() {  # run_trl NUM_PROC: seconds of TRL's preparation
  "$PEER_PYTHON" "$REPO/bench/sft/trl_prep.py" --input "$DIR/rows.jsonl" --tokenizer "$TOKENIZER" --num-proc "$1" \
    --max-length 128 >"$DIR/trl.log" 2>&1 || { cat "$DIR/trl.log"; exit 1; }
  sed -n 's/.* \([0-9.]*\) s$/\1/p' "$DIR/trl.log"
}
declare -A times
for round in $(seq 1 "$ROUNDS"); do
  for n in 1 2; do
    times[h$n]+=" $(run_hpctrain $n)"
    times[t$n]+=" $(run_trl $n)"
  done
done
# The same rows, tokens and targets on both sides (hpctrain's log; TRL's line).
ours=$(sed -n 's/.*train: [0-9]* examples -> \([0-9]*\) rows, \([0-9]*\) tokens, \([0-9]*\) of them.*/\1 rows, \2 tokens, \3 targets/p' "$DIR/hpctrain.log")
theirs=$(sed -n 's/^trl: \([0-9]* rows, [0-9]* tokens, [0-9]* targets\).*/\1/p' "$DIR/trl.log")
echo "hpctrain: $ours; trl: $theirs"
stats() { tr ' ' '\n' <<<"$1" | sed '/^$/d' | sort -g | awk '{ a[NR] = $1 } END { printf "%.2f %.2f %.2f", a[1], a[int((NR + 1) / 2)], a[NR] }'; }
echo "| run | seconds min / median / max | rows/s (median) | hpctrain / TRL (median rows/s) |"
echo "|---|---|---:|---:|"
for n in 1 2; do
  read -r hmin hmed hmax <<<"$(stats "${times[h$n]}")"
  read -r tmin tmed tmax <<<"$(stats "${times[t$n]}")"
  awk -v n="$n" -v r="$rows" -v a="$hmin" -v b="$hmed" -v c="$hmax" -v d="$tmin" -v e="$tmed" -v f="$tmax" 'BEGIN {
    printf "| hpctrain prep sft, 1 rank x %d thread(s) | %.2f / %.2f / %.2f | %.0f | %.1fx |\n", n, a, b, c, r / b, e / b
    printf "| TRL SFTTrainer preparation, num_proc %d | %.2f / %.2f / %.2f | %.0f | |\n", n, d, e, f, r / e }'
done
