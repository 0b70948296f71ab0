# --timeline on 2 ranks: a valid Chrome trace with one process per rank, every phase's spans per step nested
# in the step, bucket allreduces on the communication thread, aligned clocks, and the same intervals as
# metrics.jsonl's times (Note [Step spans]); a timeline in a missing folder, or on one rank only, is refused
# before training.
source "$(dirname "$0")/lib.sh"
make_fixture 0.0
run_ok "train with --timeline" "$WORK/run.log" mpi 2 train $(train_args "$WORK/run") --max-steps 4 --batch-size 4 \
  --gradient-accumulation-steps 2 --save-steps 2 --eval-steps 2 --bucket-mb 0.01 --first-bucket-mb 0.004 \
  --timeline "$WORK/trace.json"
"$PY" "$HERE/check_timeline.py" "$WORK/trace.json" "$WORK/run/metrics.jsonl" 4 2 \
  && ok "the trace has every phase of every step on both ranks" || bad "trace contents"
out=$(mpi 2 train $(train_args "$WORK/bad") --max-steps 1 --timeline "$WORK/missing/trace.json" 2>&1)
[[ $? -ne 0 ]] && grep -q -- "--timeline '$WORK/missing/trace.json': the folder '$WORK/missing' does not exist" <<<"$out" \
  && [[ ! -e "$WORK/bad/final" ]] && ok "--timeline in a missing folder is refused, naming it" \
  || { bad "--timeline in a missing folder"; echo "$out" | tail -5; }
# The timeline is collective (ping-pongs, gathering): a rank without it is refused at start, not left hanging.
out=$(timeout 60 "$MPIEXEC" --oversubscribe --bind-to none -np 1 "$HPCTRAIN" train $(train_args "$WORK/half") --max-steps 1 \
  --timeline "$WORK/half.json" : -np 1 "$HPCTRAIN" train $(train_args "$WORK/half") --max-steps 1 2>&1)
rc=$?
[[ $rc -ne 0 && $rc -ne 124 ]] && grep -q -- "--timeline differs across ranks: rank 0 has $WORK/half.json, rank 1 has" <<<"$out" \
  && ok "--timeline on one rank only is refused, naming it" || { bad "--timeline on one rank only"; echo "$out" | tail -5; }
finish
