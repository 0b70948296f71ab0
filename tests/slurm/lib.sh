# Helpers for the tests on the local Slurm cluster (scripts/slurm-local.sh, started by the ctest fixture):
# `bash test_x.sh HPCTRAIN REPO MPIEXEC`. Reuses the tiny-model fixture of tests/mpi_train/lib.sh; skips
# (exit 77) when the cluster cannot run here (not root, packages missing). The fixture advertises 4 CPUs
# (SLURM_LOCAL_CPUS=4 on 2 cores) so that 2 ranks x 2 threads fit.
source "$2/tests/mpi_train/lib.sh" "$@"
"$REPO/scripts/slurm-local.sh" check || exit $?
eval "$("$REPO/scripts/slurm-local.sh" env)"   # SLURM_CONF for sbatch, srun, squeue
export PATH="$(dirname "$HPCTRAIN"):$PATH" HPCTRAIN
cd "$WORK"
# A failed test leaves no job behind: the jobs it submitted are cancelled on exit.
trap 'xargs -r scancel <"$WORK/jobs" 2>/dev/null; kill_runs; [[ -n "${HPCTRAIN_KEEP_WORK:-}" ]] || rm -rf "$WORK"' EXIT

# job_state ID: JobState of the job (scontrol keeps ended jobs for MinJobAge).
job_state() { scontrol -o show job "$1" | sed -nE 's/.*JobState=([A-Z_]+).*/\1/p'; }

# release_requeued ID: Slurm holds a requeued job for 2 minutes (EligibleTime = requeue + 121 s, Reason=
# BeginTime); the tests make it eligible 2 s after the requeue (`scontrol update` also runs the scheduler at
# once). Not sooner: slurmd refuses a launch whose credential is from the same second as the revoked one
# ("Job N already killed, do not launch batch job").
held_since() { scontrol -o show job "$1" | grep -q "Reason=BeginTime" && date +%s; }
release_requeued() { scontrol update JobId="$1" StartTime=now; }

# wait_job ID SECONDS: polls scontrol (10x faster than `sbatch --wait`) until the job has ended, releasing
# it when requeued, then prints JobState, Restarts and ExitCode from `scontrol show job`.
wait_job() {
  local id=$1 limit=$(($2 * 10)) i held="" released=""
  for ((i = 0; i < limit; i++)); do
    case "$(job_state "$id")" in
      COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY|BOOT_FAIL|DEADLINE|PREEMPTED) break ;;
      PENDING)
        [[ -n "$held" ]] || held=$(held_since "$id")
        [[ -n "$held" && -z "$released" && $(date +%s) -ge $((held + 2)) ]] && release_requeued "$id" && released=1 ;;
    esac
    sleep 0.1
  done
  scontrol -o show job "$id" | grep -oE '(JobState|ExitCode|Restarts)=[^ ]+' | tr '\n' ' '
  echo
}

# submit ARGS...: sbatch --parsable, prints the job id; a failed submission ends the test.
submit() {
  local id
  id=$(sbatch --parsable "$@") && [[ -n "$id" ]] || { bad "sbatch $*"; finish; exit 1; }
  echo "$id" >>"$WORK/jobs"
  echo "$id"
}

# train_args_no_threads OUTPUT: train_args without --threads (the batch script derives it from Slurm).
train_args_no_threads() { train_args "$1" | sed 's/--threads 1 //'; }
