# The collective watchdog under mpirun -np 2 (stall_timeout.cpp): a rank that sleeps far past a 3 s timeout
# ends the job within 15 s with one message naming the waiting rank and the missing one; short waits under
# a 1 s timeout never fire. `bash test_stall_timeout.sh MPIEXEC MPI_STALL_TIMEOUT_BINARY`.
set -uo pipefail
MPIEXEC=${1:?mpiexec}
BINARY=${2:?mpi_stall_timeout binary}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
LOG=$(mktemp /tmp/hpctrain-stall.XXXXXX)
trap 'rm -f "$LOG"' EXIT
failed=0
bad() { echo "FAILED: $1"; cat "$LOG"; failed=1; }

start=$(date +%s)
timeout 60 "$MPIEXEC" --oversubscribe --bind-to none -np 2 "$BINARY" stall >"$LOG" 2>&1
rc=$? elapsed=$(( $(date +%s) - start ))
if [[ $rc -eq 0 || $rc -eq 124 || $elapsed -gt 15 ]]; then bad "stall: exit $rc after ${elapsed}s (expected non-zero within 15 s)"
else
  wanted='collective timeout: allreduce #2 did not complete within 3 s; waiting: rank 0; not arrived: rank 1 \(last completed collective #1, [0-9]+ s ago\)'
  if grep -Eq "\[rank 0\] error: $wanted" "$LOG"; then echo "ok: stall ended after ${elapsed}s naming the waiting and the missing rank"
  else bad "stall: no /$wanted/"; fi
  [[ $(grep -c 'collective timeout' "$LOG") -eq 1 ]] && echo "ok: one message" || bad "stall: expected exactly one message"
  grep -q 'returned from the allreduce' "$LOG" && bad "stall: a rank left the allreduce"
fi

timeout 60 "$MPIEXEC" --oversubscribe --bind-to none -np 2 "$BINARY" quick >"$LOG" 2>&1
rc=$?
if [[ $rc -eq 0 ]] && grep -q "quick collectives under a 1 s timeout: ok" "$LOG" && ! grep -q 'collective timeout' "$LOG"
then echo "ok: short waits do not fire and the job ends cleanly"
else bad "quick: exit $rc"; fi
exit $failed
