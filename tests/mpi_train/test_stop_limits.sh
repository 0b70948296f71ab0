# Stopping before a time limit (issue 11 item 3, Note [Stop agreement], time_limit.hpp): --max-time and
# SLURM_JOB_END_TIME 7 s away, minimum margin 5 s: the run saves checkpoint-K and exits 75 before the limit.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/stop_lib.sh"
make_fixture 0.0

STEPS=100000  # the limits stop these runs long before
started=$(date +%s)
start_run max-time -- --max-steps $STEPS --max-time 00:00:07
wait_rc
check_stopped "--max-time 00:00:07" max-time "the time limit (rank [01])"
(( $(date +%s) - started < 7 )) && ok "--max-time: stopped within 7 s" || bad "--max-time: ran past 7 s"

started=$(date +%s)
start_run job-end SLURM_JOB_END_TIME=$((started + 7)) -- --max-steps $STEPS
wait_rc
check_stopped "SLURM_JOB_END_TIME" job-end "the time limit (rank [01])"
(( $(date +%s) - started < 7 )) && ok "SLURM_JOB_END_TIME: stopped within 7 s" || bad "SLURM_JOB_END_TIME: ran past it"

finish
