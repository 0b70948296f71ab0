# The 2-rank fault cases at 4 ranks (oversubscribed, 1 thread each), where a rank is neither the first nor
# the last: a per-rank option mismatch on rank 3 (test_option_mismatch.sh), SIGTERM to rank 2 (test_signals.sh)
# and kill -9 of rank 2 (test_kill.sh). Each ends every rank within seconds with a message; the signal leaves a
# checkpoint from which --resume auto ends bitwise equal to an uninterrupted 4-rank run.
source "$(dirname "$0")/lib.sh"
RANKS=4
source "$(dirname "$0")/stop_lib.sh"
STEPS=30  # a 4-rank step on 2 cores is slower: 30 steps still leave the signal after step 5 mid-run
make_fixture 0.0
# took LABEL: prints the seconds since the last call (each case's duration, for the test budget).
section_start=$(date +%s)
took() { echo "took: $1 $(($(date +%s) - section_start))s"; section_start=$(date +%s); }

# ---- an option that differs on rank 3 only (Note [Agreed options]) ----
start=$(date +%s)
timeout 60 "$MPIEXEC" --oversubscribe --bind-to none -np 3 "$HPCTRAIN" train $(train_args "$WORK/mismatch") --max-steps 3 \
  : -np 1 "$HPCTRAIN" train $(train_args "$WORK/mismatch") --max-steps 5 >"$WORK/mismatch.log" 2>&1
rc=$? elapsed=$(($(date +%s) - start))
[[ $rc -ne 0 && $rc -ne 124 && $elapsed -le 30 ]] && ok "rank 3's --max-steps: exit $rc after ${elapsed}s" \
  || { bad "rank 3's --max-steps: exit $rc after ${elapsed}s"; cat "$WORK/mismatch.log"; }
grep -q -- "--max-steps differs across ranks: ranks 0, 1, 2 have 3, rank 3 has 5" "$WORK/mismatch.log" \
  && ok "rank 3's --max-steps: named with every rank's value" || { bad "rank 3's --max-steps: message"; cat "$WORK/mismatch.log"; }
[[ ! -e "$WORK/mismatch/checkpoint-1" && ! -e "$WORK/mismatch/final" ]] && ok "rank 3's --max-steps: nothing trained" \
  || bad "rank 3's --max-steps: a checkpoint was written"
took "option mismatch"

# ---- SIGTERM to rank 2 (Note [Stop agreement]): checkpoint, exit 75 on every rank, exact resume ----
run_ok "uninterrupted run, $STEPS steps on $RANKS ranks" "$WORK/whole.log" "$MPIEXEC" --oversubscribe --bind-to none \
  -np "$RANKS" "$HPCTRAIN" train $(train_args "$WORK/whole") "${stop_args[@]}" --max-steps $STEPS
start_run term -- --max-steps $STEPS
victim=$(rank_pid term 2)
[[ -n "$victim" ]] && ok "found rank 2 (pid $victim)" || bad "rank 2 not found"
wait_step term 5 || bad "the run did not reach step 5"
kill -TERM "$victim"
wait_rc
check_stopped "SIGTERM to rank 2 of 4" term "SIGTERM on rank 2"
check_resumes "SIGTERM to rank 2 of 4" term whole
took "SIGTERM (3 runs)"

# ---- kill -9 of rank 2: every rank ends within 30 s, mpirun names the rank, the checkpoints stay complete ----
mpi "$RANKS" train $(train_args "$WORK/killed") --max-steps 100000 --save-steps 5 --batch-size 4 >"$WORK/killed.log" 2>&1 &
launcher=$!
wait_step killed 6 || bad "the run did not reach step 6"
victim=$(rank_pid killed 2)
[[ -n "$victim" ]] && ok "found rank 2 (pid $victim)" || bad "rank 2 not found"
killed_at=$(date +%s)
kill -9 "$victim"
wait_rc
elapsed=$(($(date +%s) - killed_at))
[[ $rc -ne 0 && $elapsed -le 30 ]] && ok "kill -9 of rank 2: the job exited $rc after ${elapsed}s" \
  || bad "kill -9 of rank 2: exit $rc after ${elapsed}s"
grep -Eq "rank 2 .*(signal 9|Killed)" "$WORK/killed.log" && ok "kill -9 of rank 2: the message names rank 2 and the signal" \
  || { bad "kill -9 of rank 2: no message naming it"; tail -20 "$WORK/killed.log"; }
[[ -z "$(pgrep -f -- "--output $WORK/killed ")" ]] && ok "kill -9 of rank 2: no rank left running" || bad "ranks left running"
for dir in "$WORK"/killed/checkpoint-*; do
  (cd "$dir" && sha256sum -c --quiet checksums.sha256) && ok "$(basename "$dir") verifies" || bad "$(basename "$dir") does not verify"
done
took "kill -9"
finish
