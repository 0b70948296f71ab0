# --resume auto never starts over silently (Note [Never start over silently]), under mpirun -np 2:
#  1. the run's only checkpoint has a truncated trainer_state.json: the resume stops with an error naming the
#     checkpoint and why, on every rank, and metrics.jsonl is left as it was (not rewritten from step 0);
#  2. checkpoints 2, 4, 6 with checkpoint-6's trainer_state.json deleted: the resume names checkpoint-6 and why
#     it is skipped, continues from checkpoint-4, and at step 6 moves the damaged folder aside as this run's
#     damaged checkpoint (not "another run's"), never removing it.
source "$(dirname "$0")/lib.sh"
make_fixture

steps=(--lr-scheduler constant --batch-size 4 --eval-steps 100)
stopped() {  # stopped OUT LOG SIGNAL_STEP ARGS...: a run stopped by SIGTERM on rank 1 at SIGNAL_STEP (it saves first)
  local out=$1 log=$2 at=$3; shift 3
  HPCTRAIN_TEST_SIGNAL_AT=1:$at:1 mpi 2 train $(train_args "$out") "${steps[@]}" "$@" >"$log" 2>&1
  [[ -d "$out/checkpoint-$at" ]] && ok "stopped at step $at with checkpoint-$at" || { bad "no checkpoint-$at"; cat "$log"; }
}

# --- 1. the only checkpoint damaged ---
stopped "$WORK/one" "$WORK/one-a.log" 5 --max-steps 12 --save-steps 100
state="$WORK/one/checkpoint-5/trainer_state.json"
head -c 40 "$state" >"$state.cut" && mv "$state.cut" "$state"
before=$(sha256sum "$WORK/one/metrics.jsonl")
lines=$(wc -l <"$WORK/one/metrics.jsonl")
timeout 120 "$MPIEXEC" --oversubscribe --bind-to none -np 2 "$HPCTRAIN" train $(train_args "$WORK/one") "${steps[@]}" --max-steps 12 --save-steps 100 --resume auto \
  --log-all-ranks >"$WORK/one-b.log" 2>&1
code=$?
[[ $code -ne 0 && $code -ne 124 ]] && ok "the resume fails (exit $code), no hang" || { bad "resume exit $code"; cat "$WORK/one-b.log"; }
for rank in 0 1; do
  grep -q "rank $rank.*--resume auto: none of the 1 checkpoint(s) of run .* is intact; refusing to start over" \
    "$WORK/one-b.log" && ok "rank $rank: refuses to start over" || { bad "rank $rank message"; cat "$WORK/one-b.log"; }
done
grep -q "checkpoint-5: .*trainer_state.json" "$WORK/one-b.log" && ok "names checkpoint-5 and its trainer_state.json" \
  || bad "checkpoint-5's reason"
! grep -q "starting fresh" "$WORK/one-b.log" && ok "no fresh start" || bad "started fresh"
[[ "$(sha256sum "$WORK/one/metrics.jsonl")" == "$before" ]] && ok "metrics.jsonl kept ($lines lines)" \
  || bad "metrics.jsonl rewritten"
[[ ! -d "$WORK/one/final" ]] && ok "no final model" || bad "final/ written"

# --- 2. the newest of three damaged: skipped with its reason, moved aside as damaged at its step ---
stopped "$WORK/three" "$WORK/three-a.log" 6 --max-steps 8 --save-steps 2
rm "$WORK/three/checkpoint-6/trainer_state.json"
run_ok "resume auto past a damaged checkpoint-6" "$WORK/three-b.log" mpi 2 train $(train_args "$WORK/three") \
  "${steps[@]}" --max-steps 8 --save-steps 2 --resume auto
grep -q "skipping checkpoint-6: .*trainer_state.json" "$WORK/three-b.log" \
  && ok "names checkpoint-6 and why it is skipped" || { bad "skip reason"; cat "$WORK/three-b.log"; }
grep -q "resuming at step 4" "$WORK/three-b.log" && ok "resumed from checkpoint-4" || bad "resume point"
grep -q "this run's damaged checkpoint-6 is now checkpoint-6.damaged-" "$WORK/three-b.log" \
  && ok "the damaged checkpoint-6 is moved aside as this run's, damaged" || bad "damaged move message"
! grep -q "another run's checkpoint-6" "$WORK/three-b.log" && ok "not called another run's" || bad "called another run's"
ls -d "$WORK"/three/checkpoint-6.damaged-* >/dev/null 2>&1 && [[ -f "$WORK/three/checkpoint-6/trainer_state.json" ]] \
  && ok "the damaged folder is kept beside the new checkpoint-6" || { bad "folders"; ls "$WORK/three"; }
[[ -d "$WORK/three/final" ]] && ok "the run finished" || bad "no final/"
finish
