#!/usr/bin/env bash
# The 2-rank speed-up of `hpctrain prep text`, measured in pairs: 1 rank x 1 thread, then 2 ranks x 1 thread
# (mpirun -np 2), PAIRS times in turn on the fortunes corpus repeated to SIZE MB, so each ratio compares two
# runs a minute apart even while the VM's speed drifts. Prints every pair and the median, min and max.
# Usage: bench/prep/pairs.sh BUILD_DIR [SIZE_MB=2000] [PAIRS=3]
set -euo pipefail
BUILD=$(cd "${1:?build dir}" && pwd)
MB=${2:-2000}
PAIRS=${3:-3}
REPO=$(cd "$(dirname "$0")/../.." && pwd)
DIR=${BENCH_DIR:-/tmp/hpctrain-bench-prep-pairs}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# shellcheck source=../machine.sh
source "$REPO/bench/machine.sh"
print_machine
mkdir -p "$DIR"
trap 'rm -rf "$DIR"' EXIT
python3 "$REPO/scripts/fortunes_to_jsonl.py" --output "$DIR/base.jsonl" >/dev/null
: >"$DIR/input.jsonl"
while (( $(stat -c %s "$DIR/input.jsonl") < MB * 1000000 )); do cat "$DIR/base.jsonl" >>"$DIR/input.jsonl"; done
prep=(prep text --input "$DIR/input.jsonl" --tokenizer "$REPO/data/bert-base-uncased" --validation-fraction 0.1
      --no-progress --overwrite --threads 1)
wall() { /usr/bin/time -f "%e" -o "$DIR/time" "$@" >"$DIR/log" 2>&1 || { tail -5 "$DIR/log" >&2; exit 1; }; cat "$DIR/time"; }
echo "commit $(git -C "$REPO" rev-parse --short HEAD), $MB MB, $PAIRS pairs"
echo "| pair | 1 rank s | 2 ranks s | speed-up |"
echo "|---:|---:|---:|---:|"
ratios=()
for (( i = 1; i <= PAIRS; ++i )); do
  one=$(wall "$BUILD/hpctrain" "${prep[@]}" --output "$DIR/one.h5")
  two=$(wall mpirun --oversubscribe --bind-to none -np 2 "$BUILD/hpctrain" "${prep[@]}" --output "$DIR/two.h5")
  ratio=$(awk -v a="$one" -v b="$two" 'BEGIN { printf "%.2f", a / b }')
  ratios+=("$ratio")
  echo "| $i | $one | $two | ${ratio}x |"
done
/usr/bin/python3 "$REPO/tests/cli/prep_same_datasets.py" "$DIR/one.h5" "$DIR/two.h5" && echo "(1 and 2 ranks: same datasets)"
printf '%s\n' "${ratios[@]}" | sort -n | awk '{ r[NR] = $1 } END { printf "speed-up: median %.2fx, min %.2fx, max %.2fx\n", r[int((NR + 1) / 2)], r[1], r[NR] }'
