# sbatch jobs/train-cpu.sbatch trains a causal LM as it trains a classifier (issue 21 item 4): the preset tiny-gpt2
# on a `prep lm` file, 2 ranks through srun, to OUTPUT/final with the tokenizer beside it; the job COMPLETED with
# exit code 0, and its log and metrics.jsonl report tokens/s.
source "$(dirname "$0")/lib.sh"
make_lm_fixture
id=$(submit --ntasks-per-node=2 --cpus-per-task=1 --output="$WORK/job-%j.out" "$REPO/jobs/train-cpu.sbatch" \
  --model-config preset:tiny-gpt2 --data "$WORK/packed.h5" --tokenizer "$BPE" --output "$WORK/out" --no-progress \
  --logging-steps 1 --batch-size 4 --shuffle global --max-steps 4 --save-steps 100 --eval-steps 100)
final=$(wait_job "$id" 90)
echo "job $id: $final"
log="$WORK/job-$id.out"
[[ "$final" == *"JobState=COMPLETED"*"ExitCode=0:0"* ]] && ok "job completed with exit code 0" || { bad "job state"; cat "$log"; }
[[ -f "$WORK/out/final/model.safetensors" && -f "$WORK/out/final/tokenizer.json" ]] \
  && ok "OUTPUT/final has the model and tokenizer.json" || { bad "final folder"; ls "$WORK/out/final"; }
grep -q "model: GPT2LMHeadModel" "$log" && grep -q "x 2 rank(s)" "$log" && ok "GPT-2 on 2 ranks" || { bad "model/ranks"; head -8 "$log"; }
grep -q "done: 4 steps" "$log" && grep -q "tok/s" "$log" && ok "4 steps, tokens/s on the progress line" || bad "steps / tok/s"
grep -q '"tokens_per_second"' "$WORK/out/metrics.jsonl" && ok "metrics.jsonl has tokens_per_second" || bad "metrics.jsonl"
finish
