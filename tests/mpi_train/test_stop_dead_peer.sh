# A stop request while a peer is gone (Note [Stop while waiting], src/dist/mpi_comm.cpp): rank 1 is frozen
# (SIGSTOP: its watchdog cannot answer, as a dead rank's cannot), then rank 0 gets SIGTERM. Rank 0 waits in
# a collective rank 1 never joins; instead of waiting out the collective timeout (here 120 s) its watchdog
# finds rank 1 silent and ends the job within seconds, naming the signal, the collective and rank 1.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/stop_lib.sh"
make_fixture 0.0

start_run frozen -- --max-steps 100000 --collective-timeout 120
frozen=$(rank_pid frozen 1)
survivor=$(rank_pid frozen 0)
[[ -n "$frozen" && -n "$survivor" ]] && ok "found ranks 1 (pid $frozen) and 0 (pid $survivor)" || bad "ranks not found"
wait_step frozen 5 || bad "the run did not reach step 5"
kill -STOP "$frozen"
sleep 1
signalled_at=$SECONDS
kill -TERM "$survivor"
for _ in $(seq 1 300); do kill -0 "$launcher" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$launcher" 2>/dev/null; then
  bad "job still running 30 s after SIGTERM to rank 0 with rank 1 frozen"
  kill -9 "$frozen" "$survivor" 2>/dev/null
  kill -9 "$launcher"
else
  wait "$launcher"
  rc=$?
  [[ $rc -ne 0 && $rc -ne 75 ]] && ok "job ended ($rc) $((SECONDS - signalled_at)) s after the signal" \
    || bad "job exit code $rc (expected a failure, not 0 or 75)"
fi
kill -9 "$frozen" 2>/dev/null
grep -q "SIGTERM arrived while .* waits for rank(s) 1, which do not answer" "$WORK/frozen.log" \
  && ok "rank 0 names the signal, the collective and rank 1" || { bad "no 'which do not answer' line"; tail -5 "$WORK/frozen.log"; }
finish
