# Stopping on a signal, the other ways in (issue 11 item 3, Note [Stop agreement]): SIGUSR1 to mpirun
# (forwarded to every rank), a signal inside gradient accumulation (test hook HPCTRAIN_TEST_SIGNAL_AT), and a
# second signal, which exits at once with 128 + 15 and no checkpoint. SIGTERM to one rank: test_signals.sh.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/stop_lib.sh"
make_fixture 0.0


start_run usr1 -- --max-steps $STEPS
wait_step usr1 5 || bad "the run did not reach step 5"
kill -USR1 "$launcher"
wait_rc
# mpirun forwards the signal to each rank in turn: one rank may see it a step before the other, and then the
# stop names that rank (the lowest rank asking in the step the ranks agree on).
check_stopped "SIGUSR1 to mpirun" usr1 "SIGUSR1 on rank [01]"

# Rank 0 raises SIGTERM at the start of step 5 of 3 micro-batches each: the step finishes, checkpoint-5.
start_run accumulation HPCTRAIN_TEST_SIGNAL_AT=0:5:1 -- --max-steps 20 --gradient-accumulation-steps 3
wait_rc
check_stopped "signal during accumulation" accumulation "SIGTERM on rank 0"
[[ $stopped_at -eq 5 ]] && ok "accumulation: checkpoint of the step the signal arrived in" || bad "stopped at $stopped_at, not 5"
grep -q '"step":5,' "$WORK/accumulation/metrics.jsonl" && ! grep -q '"step":6,' "$WORK/accumulation/metrics.jsonl" \
  && ok "accumulation: step 5 logged, step 6 not run" || bad "accumulation: metrics.jsonl"

# Two signals on rank 1 in step 4: it exits at once (143) and mpirun ends the job; no checkpoint is written.
start_run twice HPCTRAIN_TEST_SIGNAL_AT=1:4:2 -- --max-steps 20
wait_rc
[[ $rc -eq 143 ]] && ok "second signal: exit code 143 (128 + SIGTERM)" || { bad "second signal: exit code $rc"; tail "$WORK/twice.log"; }
grep -q "second stop signal: exiting now without a checkpoint" "$WORK/twice.log" && ok "second signal: says so" \
  || bad "second signal: no message"
! ls -d "$WORK"/twice/checkpoint-* >/dev/null 2>&1 && ok "second signal: no checkpoint" || bad "second signal: a checkpoint"
finish
