# NaN/Inf under mpirun -np 2: eval and predict with NaN weights or Inf logits fail on every rank with the
# message (tensor name, or how many examples and the first), within seconds, and predict writes nothing.
source "$(dirname "$0")/lib.sh"
make_fixture 0.0
run_ok "train a model" "$WORK/train.log" mpi 2 train $(train_args "$WORK/run") --max-steps 2
cp -r "$WORK/run/final" "$WORK/nan" && "$PY" "$REPO/tests/cli/edit_weights.py" "$WORK/nan/model.safetensors" classifier.weight=nan
cp -r "$WORK/run/final" "$WORK/inf" && "$PY" "$REPO/tests/cli/edit_weights.py" "$WORK/inf/model.safetensors" classifier.weight=3e38 pre_classifier.bias=1000

# fails_on_both NAME PATTERN ARGS...: `mpirun -np 2 hpctrain ARGS` exits non-zero within 60 s and both ranks'
# error lines match PATTERN.
fails_on_both() {
  local name=$1 pattern=$2; shift 2
  SECONDS=0
  if timeout 120 "$MPIEXEC" --oversubscribe --bind-to none -np 2 "$HPCTRAIN" "$@" >"$WORK/fail.log" 2>&1; then
    bad "$name: exit 0"; cat "$WORK/fail.log"; return
  fi
  local seconds=$SECONDS ranks
  ranks=$(grep -Ec -- "\[rank [01]\] error: .*$pattern" "$WORK/fail.log")
  if (( seconds <= 60 && ranks == 2 )); then ok "$name (${seconds}s, both ranks)"
  else bad "$name: ${seconds}s, $ranks of 2 ranks match /$pattern/"; cat "$WORK/fail.log"; fi
}

for command in eval predict; do
  out=(); [[ $command == predict ]] && out=(--output "$WORK/preds.jsonl")
  fails_on_both "$command: NaN weights" "$WORK/nan: tensor 'classifier.weight' holds 96 NaN/Inf" \
    $command --model "$WORK/nan" --data "$WORK/data.h5" --threads 1 "${out[@]}"
  fails_on_both "$command: Inf logits" "the model gave NaN/Inf logits for [0-9]+ example\(s\) of the split \(the first is example [0-9]+\)" \
    $command --model "$WORK/inf" --data "$WORK/data.h5" --threads 1 "${out[@]}"
done
[[ ! -e "$WORK/preds.jsonl" ]] && ok "predict wrote no output" || bad "predict wrote $WORK/preds.jsonl"
finish
