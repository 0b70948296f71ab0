# The ZeRO-3 demonstration (README, "ZeRO-3: a model larger than one rank's memory"): a GPT-2 of 99 M parameters on
# 4 ranks under one per-rank address-space limit (`ulimit -v`) is refused at --zero-stage 0 by the size check
# naming the limit, and trains at --zero-stage 3 (built unit by unit, Note [Deferred materialization]; its
# checkpoint and final/ written unit by unit, Note [Streamed writes]). The limit is the launch's own address space
# (the largest VmPeak of a 2-layer model's run of the same command) plus 8 bytes per parameter: stage 0 needs 16
# (weights, gradients, AdamW's two moments) past the address space in use when it checks, stage 3 about 16/4 plus
# a unit at a time. Not under ASan (its shadow memory is terabytes of address space).
source "$(dirname "$0")/lib.sh"
if [[ -n ${HPCTRAIN_SANITIZED:-} ]]; then echo "SKIP: ulimit -v under ASan"; exit 0; fi
BPE="$REPO/tests/tokenize/golden/bpe/gpt2"
"$PY" - "$WORK/docs.jsonl" "$REPO/tests/prep/golden/lm_documents.json" <<'PYEOF'
import json, sys
docs = json.load(open(sys.argv[2]))["documents"]
with open(sys.argv[1], "w") as f:
    for text in docs:
        f.write(json.dumps({"text": text}, ensure_ascii=False) + "\n")
PYEOF
"$HPCTRAIN" prep lm --no-progress --input "$WORK/docs.jsonl" --text-field text --tokenizer "$BPE" \
  --validation-fraction 0 --seed 4 --block-size 16 --output "$WORK/lm.h5" >"$WORK/prep.log" 2>&1 \
  || { echo "fixture: prep lm failed"; cat "$WORK/prep.log"; exit 1; }
gpt2() {  # gpt2 FILE N_EMBD N_LAYER N_HEAD
  echo "{\"model_type\": \"gpt2\", \"vocab_size\": 1500, \"n_embd\": $2, \"n_layer\": $3, \"n_head\": $4,
  \"n_positions\": 64, \"resid_pdrop\": 0.0, \"embd_pdrop\": 0.0, \"attn_pdrop\": 0.0}" >"$WORK/$1"
}
gpt2 tiny.json 32 2 2
gpt2 big.json 640 20 10
PARAMS=99472640  # big.json's parameters (the run's "model:" line says it)
args() {  # args CONFIG OUTPUT
  echo train --data "$WORK/lm.h5" --model-config "$WORK/$1" --tokenizer "$BPE" --output "$WORK/$2" --threads 1 \
    --no-progress --max-steps 1 --batch-size 1 --peak-tflops 1 --report-to none
}
# The largest VmPeak (kB) of any rank of a 4-rank run of the tiny model: what launching costs in address space.
cat >"$WORK/peak.sh" <<'EOF'
"$@" & pid=$!
while kill -0 $pid 2>/dev/null; do
  awk '/VmPeak/ {print $2}' /proc/$pid/status >"$PEAK_FILE.$OMPI_COMM_WORLD_RANK.tmp" 2>/dev/null &&
    mv "$PEAK_FILE.$OMPI_COMM_WORLD_RANK.tmp" "$PEAK_FILE.$OMPI_COMM_WORLD_RANK"
  sleep 0.05
done
wait $pid
EOF
PEAK_FILE="$WORK/peak" run_ok "the tiny model's launch" "$WORK/tiny.log" "$MPIEXEC" --oversubscribe --bind-to none \
  -x PEAK_FILE -np 4 bash "$WORK/peak.sh" "$HPCTRAIN" $(args tiny.json tiny) --zero-stage 3
BASE_KB=$(cat "$WORK"/peak.[0-3] | sort -n | tail -1)
LIMIT_KB=$((BASE_KB + ${BYTES_PER_PARAMETER:-8} * PARAMS / 1024))
echo "launch VmPeak ${BASE_KB} kB; per-rank limit ulimit -v ${LIMIT_KB} kB (+ ${BYTES_PER_PARAMETER:-8} bytes x ${PARAMS} parameters)"
limited() { (ulimit -v "$LIMIT_KB" && exec "$@"); }

limited timeout 60 "$MPIEXEC" --oversubscribe --bind-to none -np 4 "$HPCTRAIN" $(args big.json s0) --zero-stage 0 \
  >"$WORK/s0.log" 2>&1
rc=$?
if ((rc == 1)) && grep -Eq "big.json: the model has $PARAMS parameters; .*: training \(weights, gradients, adamw_torch \
state\) needs .* but .* are available \(the address-space limit RLIMIT_AS \(ulimit -v\)" "$WORK/s0.log"; then
  ok "stage 0 under the limit: refused before building, naming RLIMIT_AS"
else bad "stage 0 under the limit (exit $rc)"; tail -20 "$WORK/s0.log"; fi
grep -m1 -E "RLIMIT_AS" "$WORK/s0.log" | cut -c1-400

PEAK_FILE="$WORK/peak3" run_ok "stage 3 under the same limit trains" "$WORK/s3.log" limited "$MPIEXEC" \
  --oversubscribe --bind-to none -x PEAK_FILE -np 4 bash "$WORK/peak.sh" "$HPCTRAIN" $(args big.json s3) --zero-stage 3
echo "stage 3 VmPeak per rank (kB): $(cat "$WORK"/peak3.[0-3] | tr '\n' ' ')"
grep -q "model: GPT2LMHeadModel ($PARAMS parameters" "$WORK/s3.log" && ok "$PARAMS parameters" || bad "parameter count"
[[ -f $WORK/s3/final/model.safetensors && -f $WORK/s3/checkpoint-1/optimizer.safetensors ]] \
  && ok "stage 3 wrote its checkpoint and final/ under the limit" || bad "stage 3's checkpoint or final/"
finish
