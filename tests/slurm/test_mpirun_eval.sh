# sbatch jobs/train-mpirun.sbatch (mpirun inside a 2-task allocation) trains
# the tiny model, then sbatch jobs/eval.sbatch evaluates OUTPUT/final on 2 ranks.
source "$(dirname "$0")/lib.sh"
make_fixture
id=$(submit --ntasks-per-node=2 --cpus-per-task=1 --output="$WORK/train-%j.out" "$REPO/jobs/train-mpirun.sbatch" \
  $(train_args_no_threads "$WORK/out") --max-steps 4 --save-steps 100 --eval-steps 100)
final=$(wait_job "$id" 60)
log="$WORK/train-$id.out"
[[ "$final" == *"JobState=COMPLETED"*"ExitCode=0:0"* ]] && ok "mpirun job completed" || { bad "mpirun job: $final"; cat "$log"; }
grep -q "x 2 rank(s)" "$log" && ok "2 ranks" || { bad "rank count"; head -5 "$log"; }
id=$(submit --ntasks=2 --output="$WORK/eval-%j.out" "$REPO/jobs/eval.sbatch" --model "$WORK/out/final" \
  --data "$WORK/data.h5" --split validation --json)
final=$(wait_job "$id" 60)
log="$WORK/eval-$id.out"
[[ "$final" == *"JobState=COMPLETED"*"ExitCode=0:0"* ]] && ok "eval job completed" || { bad "eval job: $final"; cat "$log"; }
"$PY" -c "import json, sys; m = json.load(open(sys.argv[1])); sys.exit(0 if m['examples'] == int(sys.argv[2]) else 1)" \
  "$log" "$VAL_N" && ok "eval counted all $VAL_N validation examples" || { bad "eval output"; cat "$log"; }
finish
