# sbatch jobs/train-cpu.sbatch with 2 tasks trains the tiny model to OUTPUT/final: 2 ranks through srun,
# threads from --cpus-per-task (2: the default would be 1 with 2 ranks on 2 cores), the job COMPLETED with exit code 0.
source "$(dirname "$0")/lib.sh"
make_fixture
id=$(submit --ntasks-per-node=2 --cpus-per-task=2 --output="$WORK/job-%j.out" "$REPO/jobs/train-cpu.sbatch" \
  $(train_args_no_threads "$WORK/out") --shuffle global --max-steps 6 --save-steps 100 --eval-steps 100)
final=$(wait_job "$id" 60)
echo "job $id: $final"
log="$WORK/job-$id.out"
[[ "$final" == *"JobState=COMPLETED"*"ExitCode=0:0"* ]] && ok "job completed with exit code 0" || { bad "job state"; cat "$log"; }
[[ -f "$WORK/out/final/model.safetensors" ]] && ok "OUTPUT/final/model.safetensors written" || bad "no final model"
grep -q "x 2 rank(s)" "$log" && ok "2 ranks" || { bad "rank count"; head -5 "$log"; }
grep -q "with 2 CPU thread(s) per rank" "$log" && ok "threads from SLURM_CPUS_PER_TASK" || bad "threads"
grep -q "done: 6 steps" "$log" && ok "6 steps" || bad "step count"
finish
