# The batch shell's side of Note [Preemption and requeue] (jobs/lib.sh), with a stand-in binary
# (fake_hpctrain.sh, HPCTRAIN=...): `scancel --signal=USR1 --batch` reaches every rank of the srun step;
# exit code 75 requeues the job; the requeued run gets `--resume auto` and --threads from --cpus-per-task.
source "$(dirname "$0")/lib.sh"
export FAKE_LOG="$WORK/fake"
id=$(HPCTRAIN="$REPO/tests/slurm/fake_hpctrain.sh" submit --ntasks-per-node=2 --cpus-per-task=2 \
  --output="$WORK/job-%j.out" "$REPO/jobs/train-cpu.sbatch" --data D.h5 --output OUT)
for _ in $(seq 100); do [[ -f "$FAKE_LOG.0" && -f "$FAKE_LOG.1" ]] && break; sleep 0.05; done
scancel --signal=USR1 --batch "$id" && ok "USR1 sent to the batch shell of job $id" || bad "scancel --signal"
final=$(wait_job "$id" 30)
echo "job $id: $final"
head -50 "$WORK/job-$id.out" "$FAKE_LOG".*
[[ "$final" == *"JobState=COMPLETED"*"Restarts=1"*"ExitCode=0:0"* ]] && ok "requeued once, then completed" \
  || bad "job state: $final"
for rank in 0 1; do
  expected="start restart=0 args=train --data D.h5 --output OUT --threads 2
usr1
start restart=1 args=train --data D.h5 --output OUT --threads 2 --resume auto
resumed"
  [[ "$(cat "$FAKE_LOG.$rank")" == "$expected" ]] && ok "rank $rank: USR1 forwarded, restarted with --resume auto" \
    || bad "rank $rank's events"
done
grep -q "requeueing" "$WORK/job-$id.out" && ok "the batch shell requeued on exit code 75" || bad "no requeue message"
finish
