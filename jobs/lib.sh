# Shared code of the jobs/*.sbatch scripts (sourced by them, never run): the Slurm check, the hpctrain
# binary, threads per rank, and the preemption protocol (forward USR1, requeue on exit code 75).
# It does not choose launchers or resources: each .sbatch script says those itself.
# Each script finds this file itself: Slurm runs a copy of the script from its spool folder, so $0 does not
# tell; `scontrol show job` records the submitted path (Command=PATH ARGS...); HPCTRAIN_JOBS=DIR overrides.

# hpctrain_require_slurm SCRIPT: refuse to run outside a Slurm allocation, with a hint.
hpctrain_require_slurm() {
  [[ -n "${SLURM_JOB_ID:-}" ]] && return 0
  echo "$1: not inside a Slurm job (SLURM_JOB_ID is unset). Submit it: sbatch $1 [hpctrain options...]" >&2
  echo "  (to run without Slurm: mpirun -np N hpctrain ... , see README.md, \"Running on a Slurm cluster\")" >&2
  exit 2
}

# hpctrain_binary: $HPCTRAIN, else `hpctrain` on PATH, else the repository's build (build/hpctrain).
hpctrain_binary() {
  local repo
  repo=$(cd "$HPCTRAIN_JOBS/.." && pwd)
  if [[ -n "${HPCTRAIN:-}" ]]; then
    [[ -x "$HPCTRAIN" ]] || { echo "HPCTRAIN=$HPCTRAIN: not an executable file" >&2; exit 2; }
    echo "$HPCTRAIN"
  elif command -v hpctrain >/dev/null; then command -v hpctrain
  elif [[ -x "$repo/build/hpctrain" ]]; then echo "$repo/build/hpctrain"
  else
    echo "hpctrain not found: not on PATH, not in $repo/build/. Build it (scripts/build.sh) or set HPCTRAIN=/path/to/hpctrain" >&2
    exit 2
  fi
}

# hpctrain_has_option OPTION ARGS...: the user's arguments already give OPTION (--x or --x=...).
hpctrain_has_option() {
  local option=$1 arg; shift
  for arg in "$@"; do [[ "$arg" == "$option" || "$arg" == "$option="* ]] && return 0; done
  return 1
}

# hpctrain_train_args ARGS...: prints (NUL-separated) the user's arguments plus `--threads
# $SLURM_CPUS_PER_TASK` and, in a requeued job (SLURM_RESTART_COUNT > 0), `--resume auto`, unless given.
hpctrain_train_args() {
  local extra=()
  hpctrain_has_option --threads "$@" || extra+=(--threads "${SLURM_CPUS_PER_TASK:-1}")
  if [[ "${SLURM_RESTART_COUNT:-0}" -gt 0 ]] && ! hpctrain_has_option --resume "$@"; then extra+=(--resume auto); fi
  printf '%s\0' "$@" "${extra[@]}"
}

# Note [Preemption and requeue]: the training scripts ask for `--signal=B:USR1@120 --requeue`: 120 s before
# the time limit (or on `scancel --signal=USR1 --batch`) Slurm signals only this batch shell. It forwards
# USR1 to the job step (srun and mpirun forward it to every rank); hpctrain finishes the optimizer step,
# saves a checkpoint and exits with 75 (EX_TEMPFAIL, "stopped early, checkpoint saved"); the shell then
# requeues the job, whose next run passes `--resume auto` (hpctrain_train_args).
HPCTRAIN_EXIT_STOPPED=75

# hpctrain_step COMMAND...: runs the job step in the background (bash runs traps only between commands),
# forwards USR1 to it, returns its exit code; on 75 requeues the job.
hpctrain_step() {
  local step status
  "$@" &
  step=$!
  trap 'echo "$(date +%T) job $SLURM_JOB_ID: USR1, forwarding it to the job step (pid $step)" >&2; kill -USR1 "$step" 2>/dev/null' USR1
  status=0
  while :; do
    wait "$step" && status=0 || status=$?
    kill -0 "$step" 2>/dev/null || break   # a trap interrupted `wait`: the step still runs
  done
  trap - USR1
  [[ $status -gt 128 ]] && { wait "$step" 2>/dev/null; status=$?; }   # the step ended during the trap
  hpctrain_requeue_if_stopped "$status"
}

# hpctrain_requeue_if_stopped STATUS: on 75 requeue this job (exit 0), else pass STATUS on.
hpctrain_requeue_if_stopped() {
  if [[ $1 -eq $HPCTRAIN_EXIT_STOPPED ]]; then
    echo "$(date +%T) job $SLURM_JOB_ID: hpctrain saved a checkpoint and stopped early; requeueing (restart $((${SLURM_RESTART_COUNT:-0} + 1)))" >&2
    scontrol requeue "$SLURM_JOB_ID" && return 0
    echo "scontrol requeue $SLURM_JOB_ID failed; resubmit with --resume auto" >&2
  fi
  return "$1"
}
