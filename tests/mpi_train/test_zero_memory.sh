# `mpirun -np 2 hpctrain estimate-memory --measure --zero-stage S --world-size 2` (Note [Measured ZeRO step]):
# every rank runs the step at stage S, rank 0 prints the largest rank's peak; the estimate (Note [ZeRO memory
# arithmetic]) is within 20 % of it at stages 0, 1 and 2 on the DistilBERT benchmark model (its word embeddings a
# bucket of their own, whose reduce-scatter scratch the estimate counts) and a GPT-2-style causal LM (the logits
# dominate), and at stage 3 (sharded parameters, the gathered units) at the two larger shapes. A --world-size other
# than the launched ranks is an error naming both.
source "$(dirname "$0")/lib.sh"
cp "$REPO/bench/predict/distilbert-bench.json" "$WORK/distilbert.json"
cat >"$WORK/gpt2.json" <<'JSON'
{"model_type": "gpt2", "n_embd": 256, "n_layer": 4, "n_head": 4, "vocab_size": 50257, "n_positions": 1024}
JSON
# DistilBERT at 8 x 64 tokens (the reduction's transients above the activations) and 16 x 128 (bench/zero's
# shape: the activation peak above them)
for run in "distilbert 8 64 0 1 2" "distilbert 16 128 0 1 2 3" "gpt2 8 128 0 1 2 3"; do
  read -r model batch length stages <<<"$run"
  for stage in $stages; do
    name="$model-$batch-stage$stage"
    args=(estimate-memory --model-config "$WORK/$model.json" --batch-size "$batch" --sequence-length "$length"
          --zero-stage "$stage" --world-size 2 --threads 1 --json)
    if [[ -n ${HPCTRAIN_SANITIZED:-} ]]; then  # under sanitizers the figure is not compared
      run_ok "$name: --measure runs on 2 ranks" "$WORK/err" mpi 2 "${args[@]}" --measure; continue; fi
    mpi 2 "${args[@]}" --measure --tolerance 0.20 >"$WORK/$name.json" 2>"$WORK/err"
    rc=$?
    summary=$("$PY" -c "import json,sys; d = json.load(open(sys.argv[1])); m = d['measured']; \
assert d.get('zero_stage', 0) == $stage and m['ranks'] == 2; print('%+.1f %% of %.1f MiB' % (100 * m['relative_error'], m['peak_bytes'] / 2**20))" \
      "$WORK/$name.json" 2>/dev/null)
    [[ $rc -eq 0 && -n $summary ]] && ok "$name: estimate within 20 % of the largest rank's measured peak ($summary)" \
      || { bad "$name: estimate vs --measure on 2 ranks (${summary:-no result}, exit $rc)"; cat "$WORK/$name.json" "$WORK/err"; }
  done
done
# The JSON is printed once (rank 0), and the table's measured row names the largest rank.
[[ -n ${HPCTRAIN_SANITIZED:-} ]] || "$PY" -c "import json,sys; json.load(open(sys.argv[1]))" "$WORK/gpt2-8-stage2.json" && ok "one JSON document on stdout" \
  || bad "stdout is not one JSON document"
mpi 2 estimate-memory --model-config "$WORK/distilbert.json" --batch-size 2 --sequence-length 16 --zero-stage 1 \
  --world-size 2 --threads 1 --measure >"$WORK/table.txt" 2>"$WORK/err"
[[ $(grep -c "measured peak (largest rank)" "$WORK/table.txt") -eq 1 ]] && ok "the table's measured row, printed once" \
  || { bad "table output"; cat "$WORK/table.txt" "$WORK/err"; }
# --world-size must be the launched world size: 2 ranks with --world-size 4, one process with --world-size 2.
mismatch() {
  local name=$1 pattern=$2; shift 2
  if "$@" >"$WORK/out" 2>"$WORK/err"; then bad "$name: exit 0"; elif grep -Eq -- "$pattern" "$WORK/err"; then ok "$name"
  else bad "$name: stderr does not match /$pattern/"; cat "$WORK/err"; fi
}
SMALL=(estimate-memory --model-config "$WORK/distilbert.json" --batch-size 2 --sequence-length 16 --threads 1 --measure)
mismatch "--world-size 4 on 2 ranks" "--world-size 4: launched on 2 rank" mpi 2 "${SMALL[@]}" --zero-stage 1 --world-size 4
mismatch "--world-size 2 on 1 process" "--world-size 2: launched on 1 rank" "$HPCTRAIN" "${SMALL[@]}" --zero-stage 2 --world-size 2
finish
