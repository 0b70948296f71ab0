# Helpers of the stopping tests (test_signals.sh, test_stop_limits.sh; Note [Stop agreement]), after lib.sh.

STEPS=100  # of every run: ~10 ms a step on 2 ranks, so an external signal after step 5 falls mid-run
RANKS=${RANKS:-2}  # of every run (test_four_ranks.sh sets 4)
stop_args=(--lr-scheduler constant --warmup-steps 3 --save-steps 1000 --batch-size 4 --shuffle global)

# start_run NAME [ENV=VALUE...] -- [TRAIN ARGS...]: training in the background into $WORK/NAME; sets $launcher.
start_run() {
  local name=$1; shift
  local env=()
  while [[ $# -gt 0 && $1 != -- ]]; do env+=("$1"); shift; done
  shift
  env "${env[@]}" "$MPIEXEC" --oversubscribe --bind-to none -np "$RANKS" "$HPCTRAIN" train $(train_args "$WORK/$name") \
    "${stop_args[@]}" "$@" >"$WORK/$name.log" 2>&1 &
  launcher=$!
}

# wait_rc: waits up to 60 s for $launcher; sets $rc (or kills it and fails).
wait_rc() {
  for _ in $(seq 1 600); do kill -0 "$launcher" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$launcher" 2>/dev/null; then bad "job still running after 60 s"; kill -9 "$launcher"; fi
  wait "$launcher"
  rc=$?
}

# wait_step NAME S: until $WORK/NAME/metrics.jsonl logged step S (up to 30 s).
wait_step() {
  for _ in $(seq 1 600); do
    grep -q "\"step\":$2[,}]" "$WORK/$1/metrics.jsonl" 2>/dev/null && return 0
    sleep 0.05
  done
  return 1
}

# check_stopped LABEL NAME REASON: the run exited 75 naming REASON, left one complete checkpoint-K (K < STEPS,
# sha256sum verifies) and no final model; sets $stopped_at = K.
check_stopped() {
  local label=$1 name=$2 reason=$3 dir
  [[ $rc -eq 75 ]] && ok "$label: exit code 75" || { bad "$label: exit code $rc (expected 75)"; tail -20 "$WORK/$name.log"; }
  grep -q "stopped early by $reason after step" "$WORK/$name.log" && ok "$label: rank 0 names $reason" \
    || bad "$label: no 'stopped early by $reason' line"
  grep -q "resume with .* --resume auto (exit code 75)" "$WORK/$name.log" && ok "$label: resume hint" || bad "$label: no resume hint"
  dir=$(ls -d "$WORK/$name"/checkpoint-* 2>/dev/null | tail -1)
  stopped_at=${dir##*checkpoint-}
  [[ -n "$dir" && $stopped_at -lt $STEPS ]] && ok "$label: stopped mid-run at step $stopped_at" \
    || { bad "$label: no checkpoint before step $STEPS ($dir)"; stopped_at=0; return; }
  grep -q "after step $stopped_at: checkpoint $dir is complete" "$WORK/$name.log" && ok "$label: the line names $dir" \
    || bad "$label: the line does not name $dir"
  (cd "$dir" && sha256sum -c --quiet checksums.sha256) && ok "$label: checkpoint-$stopped_at verifies" \
    || bad "$label: checkpoint-$stopped_at does not verify"
  [[ ! -e "$WORK/$name/final" ]] && ok "$label: no final model" || bad "$label: a final model was written"
}

# check_resumes LABEL NAME REFERENCE: --resume auto of $WORK/NAME continues from checkpoint-$stopped_at to
# STEPS; final weights equal $WORK/REFERENCE's bitwise, and metrics.jsonl reads as one run with its losses.
check_resumes() {
  local label=$1 name=$2 reference=$3
  run_ok "$label: resume auto" "$WORK/$name-resume.log" "$MPIEXEC" --oversubscribe --bind-to none -np "$RANKS" "$HPCTRAIN" \
    train $(train_args "$WORK/$name") "${stop_args[@]}" --max-steps $STEPS --resume auto
  grep -q "resuming at step $stopped_at " "$WORK/$name-resume.log" && ok "$label: resumed at step $stopped_at" \
    || bad "$label: resume point"
  compare "$WORK/$reference/final/model.safetensors" "$WORK/$name/final/model.safetensors" 0 \
    && ok "$label: final weights == uninterrupted run's" || bad "$label: final weights differ"
  "$PY" - "$WORK/$reference/metrics.jsonl" "$WORK/$name/metrics.jsonl" <<'PYEOF' \
    && ok "$label: metrics.jsonl reads as one run" || bad "$label: metrics.jsonl"
import json, sys
def steps(path):
    return [(e["step"], e["loss"]) for e in map(json.loads, open(path)) if "loss" in e]
a, b = steps(sys.argv[1]), steps(sys.argv[2])
sys.exit(0 if a == b and [s for s, _ in a] == list(range(1, len(a) + 1)) else 1)
PYEOF
}
