# Stopping before a time limit (issue 11 item 3, Note [Stop agreement], time_limit.hpp): --max-time and
# SLURM_JOB_END_TIME 8 s away, minimum margin 5 s: the run saves checkpoint-K and exits 75 before the limit.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/stop_lib.sh"
make_fixture 0.0

STEPS=100000  # the limits stop these runs long before

# saved_before_limit NAME SECONDS LABEL: checkpoint-K was complete less than SECONDS after the run folder was
# claimed (run.json, early in set-up: the budget counts from run_training's start, before it; mpirun's own
# start and end, slow on a loaded machine, are outside it).
saved_before_limit() {
  "$PY" -c "import os, sys; d = sys.argv[1]; print(os.path.getmtime(d + '/checkpoint-$stopped_at/checksums.sha256') \
- os.path.getmtime(d + '/run.json'))" "$WORK/$1" >"$WORK/$1.seconds"
  "$PY" -c "import sys; sys.exit(0 if float(open(sys.argv[1]).read()) < $2 else 1)" "$WORK/$1.seconds" \
    && ok "$3: checkpoint saved $(cat "$WORK/$1.seconds") s into the run, before the ${2} s limit" \
    || bad "$3: checkpoint saved $(cat "$WORK/$1.seconds") s into the run, past the ${2} s limit"
}
started=$(date +%s)
start_run max-time -- --max-steps $STEPS --max-time 00:00:08
wait_rc
check_stopped "--max-time 00:00:08" max-time "the time limit (rank [01])"
saved_before_limit max-time 8 "--max-time"

started=$(date +%s)
start_run job-end SLURM_JOB_END_TIME=$((started + 8)) -- --max-steps $STEPS
wait_rc
check_stopped "SLURM_JOB_END_TIME" job-end "the time limit (rank [01])"
saved_before_limit job-end 8 "SLURM_JOB_END_TIME"

finish
