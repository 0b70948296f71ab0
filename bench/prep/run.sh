#!/usr/bin/env bash
# Throughput and peak RSS of `hpctrain prep text` (1 rank, 2 ranks) against the Hugging Face `datasets` peer
# (map(tokenizer, batched=True, num_proc=N) writing Arrow) on the fortunes corpus repeated to SIZE MB.
# Usage: bench/prep/run.sh BUILD_DIR [SIZES_MB="200 2000"] [PEER_MAX_MB=200]
# The peer needs a venv with datasets + tokenizers: PEER_PYTHON (default python3).
# Generated inputs and outputs live in BENCH_DIR (default /tmp/hpctrain-bench-prep) and are deleted at the end.
set -euo pipefail
BUILD=$(cd "${1:?build dir}" && pwd)
SIZES=${2:-"200 2000"}
PEER_MAX_MB=${3:-200}
REPO=$(cd "$(dirname "$0")/../.." && pwd)
PEER_PYTHON=${PEER_PYTHON:-python3}
DIR=${BENCH_DIR:-/tmp/hpctrain-bench-prep}
TOKENIZER=$REPO/data/bert-base-uncased
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 TOKENIZERS_PARALLELISM=false RAYON_NUM_THREADS=1
# shellcheck source=../machine.sh
source "$REPO/bench/machine.sh"
print_machine
mkdir -p "$DIR"
trap 'rm -rf "$DIR"' EXIT
python3 "$REPO/scripts/fortunes_to_jsonl.py" --output "$DIR/base.jsonl" >/dev/null

# measure LABEL MB CMD...: one table row: wall seconds, MB/s, peak RSS (the largest process: rank or worker),
# and for hpctrain rank 0's phases (reading, planning, tokenizing, writing: seconds).
measure() {
  local label=$1 mb=$2; shift 2
  /usr/bin/time -f "%e %M" -o "$DIR/time" "$@" >"$DIR/log" 2>&1 || { echo "$label failed:"; tail -5 "$DIR/log"; return; }
  read -r seconds kb <"$DIR/time"
  phases=$(sed -n 's/.*phases (rank 0): //p' "$DIR/log" | sed 's/reading //; s/, planning /\//; s/, tokenizing /\//; s/, writing /\//; s/ s//g')
  awk -v l="$label" -v mb="$mb" -v s="$seconds" -v kb="$kb" -v p="${phases:--}" \
    'BEGIN { printf "| %s | %d | %.1f | %.1f | %d | %s |\n", l, mb, s, mb / s, kb / 1024, p }'
}

# The three hpctrain rows; ROUND names them (the rows run before and after the peer: their spread is the drift).
hpctrain_rows() {
  local round=$1
  measure "hpctrain, 1 rank x 1 thread ($round)" "$real_mb" "$BUILD/hpctrain" "${prep[@]}" --threads 1 --output "$DIR/one.h5"
  measure "hpctrain, 2 ranks x 1 thread ($round)" "$real_mb" mpirun --oversubscribe --bind-to none -np 2 "$BUILD/hpctrain" \
    "${prep[@]}" --threads 1 --output "$DIR/two.h5"
  measure "hpctrain, 1 rank x 2 threads ($round)" "$real_mb" "$BUILD/hpctrain" "${prep[@]}" --threads 2 --output "$DIR/one2.h5"
}

echo "commit: $(git -C "$REPO" rev-parse --short HEAD)"
echo "| run | input MB | seconds | MB/s | peak RSS MiB | phases s (read/plan/tokenize/write) |"
echo "|---|---:|---:|---:|---:|---|"
for mb in $SIZES; do
  input=$DIR/corpus-$mb.jsonl
  : >"$input"
  while (( $(stat -c %s "$input") < mb * 1000000 )); do cat "$DIR/base.jsonl" >>"$input"; done
  real_mb=$(( $(stat -c %s "$input") / 1000000 ))
  prep=(prep text --input "$input" --tokenizer "$TOKENIZER" --validation-fraction 0.1 --no-progress --overwrite)
  hpctrain_rows 1
  /usr/bin/python3 "$REPO/tests/cli/prep_same_datasets.py" "$DIR/one.h5" "$DIR/two.h5" && echo "(1 and 2 ranks: same datasets)"
  rm -f "$DIR"/*.h5
  if (( mb <= PEER_MAX_MB )); then
    for n in 1 2; do
      rm -rf "$DIR/cache"
      measure "HF datasets map, num_proc=$n" "$real_mb" "$PEER_PYTHON" "$REPO/bench/prep/hf_prep.py" --input "$input" \
        --vocab "$TOKENIZER/vocab.txt" --cache "$DIR/cache" --num-proc "$n"
    done
    rm -rf "$DIR/cache"
    hpctrain_rows 2
  fi
  rm -f "$DIR"/*.h5 "$input"
done
