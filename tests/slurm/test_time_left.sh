# The job's time limit under a Slurm that does not set SLURM_JOB_END_TIME (22.05): `srun --time=1` (one
# minute) runs a training far longer than that; rank 0 asks squeue for the time left, and the run saves a
# checkpoint and exits 75 before Slurm would kill it (Note [Stop agreement]; train/time_limit.hpp).
# About 60 s: Slurm's limits are whole minutes.
source "$(dirname "$0")/lib.sh"
make_fixture
long=(--epochs 100000 --max-steps 10000000 --save-steps 10000000 --eval-steps 10000000 --batch-size 4)
start=$SECONDS
srun --time=1 --mpi=pmix -n 2 "$HPCTRAIN" train $(train_args "$WORK/run") "${long[@]}" >"$WORK/run.log" 2>&1
rc=$?
took=$((SECONDS - start))
[[ $rc -eq 75 ]] && ok "exit code 75 after ${took} s (job limit 60 s)" || { bad "exit code $rc after ${took} s"; tail -20 "$WORK/run.log"; }
grep -qE "Slurm job [0-9]+: [0-9]+ s left \(squeue\)" "$WORK/run.log" && ok "rank 0 read the time left from squeue" \
  || bad "no 'Slurm job N: S s left (squeue)' line"
grep -q "stopped early by the time limit" "$WORK/run.log" && ok "stopped by the time limit" || bad "no 'stopped early by the time limit' line"
dir=$(ls -d "$WORK/run"/checkpoint-* 2>/dev/null | tail -1)
[[ -n "$dir" ]] && (cd "$dir" && sha256sum -c --quiet checksums.sha256) && ok "$(basename "$dir") complete" \
  || bad "no complete checkpoint"
[[ ! -e "$WORK/run/final" ]] && ok "no final model" || bad "a final model was written"
finish
