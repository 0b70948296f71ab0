# Stopping on a signal (issue 11 item 3, Note [Stop agreement]): SIGTERM sent to rank 1's pid only (as
# Slurm signals tasks), mid-run: the step finishes, rank 0 saves checkpoint-K, every rank exits 75, and
# --resume auto ends with the same weights and metrics as an uninterrupted run. SIGUSR1 to mpirun, the time
# limits and a second signal: test_stop_limits.sh.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/stop_lib.sh"
make_fixture 0.0

run_ok "uninterrupted run, $STEPS steps" "$WORK/whole.log" "$MPIEXEC" --oversubscribe --bind-to none -np 2 "$HPCTRAIN" \
  train $(train_args "$WORK/whole") "${stop_args[@]}" --max-steps $STEPS

start_run term -- --max-steps $STEPS
victim=$(rank_pid term 1)
[[ -n "$victim" ]] && ok "found rank 1 (pid $victim)" || bad "rank 1 not found"
wait_step term 5 || bad "the run did not reach step 5"
kill -TERM "$victim"
wait_rc
check_stopped "SIGTERM to rank 1" term "SIGTERM on rank 1"
check_resumes "SIGTERM to rank 1" term whole

finish
