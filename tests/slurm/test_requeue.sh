# Preemption: `scancel --signal=USR1 --batch` on a running jobs/train-cpu.sbatch job (2 ranks) makes the
# batch shell forward USR1 to the ranks; hpctrain saves a checkpoint of the current step and exits 75; the
# job requeues itself, resumes with --resume auto and ends with the same parameters as an uninterrupted
# run (--shuffle global, dropout off). Note [Preemption and requeue] in jobs/lib.sh.
source "$(dirname "$0")/lib.sh"
make_fixture
# 1000 steps (about 4 s unloaded): the signal, sent at step 10, must reach the ranks through slurmd and the batch
# shell before the run ends (200 steps ended first on an idle machine).
steps=(--shuffle global --max-steps 1000 --save-steps 100000 --eval-steps 100000 --batch-size 4)
run_ok "uninterrupted mpirun -np 2" "$WORK/whole.log" mpi 2 train $(train_args "$WORK/whole") "${steps[@]}"
id=$(submit --ntasks-per-node=2 --cpus-per-task=1 --output="$WORK/job-%j.out" "$REPO/jobs/train-cpu.sbatch" \
  $(train_args_no_threads "$WORK/out") "${steps[@]}")
log="$WORK/job-$id.out"
for _ in $(seq 300); do grep -q "^step 10/" "$log" 2>/dev/null && break; sleep 0.05; done  # running, mid-run
scancel --signal=USR1 --batch "$id" && ok "USR1 sent to the batch shell of job $id" || bad "scancel --signal"
final=$(wait_job "$id" 60)
echo "job $id: $final"
cat "$log"
[[ "$final" == *"JobState=COMPLETED"*"Restarts=1"*"ExitCode=0:0"* ]] && ok "requeued once, then completed" \
  || bad "job state: $final$([[ "$final" == *"ExitCode=138:"* ]] && echo " (USR1 killed hpctrain: no stop handling)")"
stopped=$(sed -nE 's/.*resuming at step ([0-9]+).*/\1/p' "$log" | head -1)
[[ -n "$stopped" && "$stopped" -gt 0 && "$stopped" -lt 1000 ]] && ok "resumed mid-run at step $stopped" \
  || bad "no 'resuming at step N' in the requeued run"
[[ -n "$stopped" && -d "$WORK/out/checkpoint-$stopped" ]] && ok "checkpoint-$stopped saved at the stop" \
  || { bad "no checkpoint of the stop step"; ls "$WORK/out"; }
grep -q "requeueing" "$log" && ok "the batch shell requeued on exit code 75" || bad "no requeue message"
compare "$WORK/whole/final/model.safetensors" "$WORK/out/final/model.safetensors" 0 \
  && ok "resumed weights == uninterrupted weights" || bad "resumed weights differ"
finish
