# Failure behaviour under mpirun -np 2: invalid options are rejected before any work; an exception on one
# rank ends the job within seconds naming the rank; a non-finite loss stops every rank with a message.
source "$(dirname "$0")/lib.sh"
make_fixture 0.0

# expect_fail NAME PATTERN ARGS...: `mpirun -np 2 hpctrain ARGS` exits non-zero within 60 s, output matches.
expect_fail() {
  local name=$1 pattern=$2; shift 2
  local start=$(date +%s)
  timeout 120 "$MPIEXEC" --oversubscribe --bind-to none -np 2 "$HPCTRAIN" "$@" >"$WORK/fail.log" 2>&1
  local rc=$? elapsed=$(( $(date +%s) - start ))
  if [[ $rc -eq 0 || $rc -eq 124 || $elapsed -gt 60 ]]; then bad "$name: exit $rc after ${elapsed}s"; cat "$WORK/fail.log"; return; fi
  grep -Eq -- "$pattern" "$WORK/fail.log" && ok "$name (${elapsed}s)" || { bad "$name: no /$pattern/"; cat "$WORK/fail.log"; }
}

expect_fail "batch size 0" "--batch-size 0: expected an integer >= 1" train $(train_args "$WORK/a") --batch-size 0
expect_fail "overlap maybe" "--overlap 'maybe': expected on or off" train $(train_args "$WORK/b") --overlap maybe
expect_fail "shuffle random" "shard, global|global" train $(train_args "$WORK/c") --shuffle random
expect_fail "missing --data" "data" train --model-config "$WORK/config.json" --output "$WORK/d"
expect_fail "unknown option" "unrecognised option|unknown option" train $(train_args "$WORK/e") --learning-rate 1
for d in a b c d e; do [[ -e "$WORK/$d" ]] && bad "--output $d was created by a rejected run"; done
ok "rejected runs created no output folder"

# One rank fails alone (its trace file cannot be created): the job ends, naming rank 1 and the reason.
mkdir -p "$WORK/trace/examples-rank1.txt"
expect_fail "error on rank 1 ends the job" "\[rank 1\] error: .*examples-rank1.txt" \
  train $(train_args "$WORK/f") --trace-examples "$WORK/trace" --max-steps 50

LR=1e30  # one step makes the weights overflow
expect_fail "non-finite loss stops every rank" "\[rank 0\] error: .*not finite" \
  train $(train_args "$WORK/g") --max-grad-norm 0 --lr-scheduler constant
grep -q "\[rank 1\] error: .*not finite" "$WORK/fail.log" && ok "rank 1 says so too" || bad "rank 1 message"
run_ok "--skip-nonfinite skips instead" "$WORK/skip.log" mpi 2 train $(train_args "$WORK/h") --max-grad-norm 0 \
  --lr-scheduler constant --max-steps 4 --skip-nonfinite
unset LR
grep -q "skipped on every rank" "$WORK/skip.log" && ok "skips reported" || bad "skip message"
finish
