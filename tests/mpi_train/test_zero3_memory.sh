# The out-of-memory demonstration of --zero-stage 3 (README, "ZeRO stages"): under one per-rank address-space
# limit (`ulimit -v`), a GPT-2 whose stage-0 training does not fit is refused at stage 0 with the clear
# out-of-memory message of the size check (Note [Size before building]) and trains on 4 ranks at stage 3. The limit
# is scaled to the model: a rank's VmSize at the check (read from the check's own message under a large limit) plus
# 12 bytes per parameter, between what stage 3 needs on 4 ranks (the whole model built once, 4 bytes per
# parameter, plus a quarter of the weights, gradients and AdamW state, 4 more) and what stage 0 needs (16).
source "$(dirname "$0")/lib.sh"
make_lm_fixture
cat >"$WORK/big.json" <<'JSON'
{"model_type": "gpt2", "vocab_size": 1500, "n_embd": 384, "n_layer": 8, "n_head": 4, "n_positions": 64,
 "resid_pdrop": 0.0, "embd_pdrop": 0.0, "attn_pdrop": 0.0}
JSON
sed 's/"n_layer": 8/"n_layer": 800000/' "$WORK/big.json" >"$WORK/huge.json"
lm() {  # lm CONFIG OUTPUT
  echo --data "$WORK/packed.h5" --model-config "$WORK/$1" --tokenizer "$BPE" --output "$WORK/$2" --threads 1 \
    --no-progress --logging-steps 1 --max-steps 2 --batch-size 1 --eval-steps 100 --save-steps 100 --peak-tflops 1 \
    --report-to none
}
# The VmSize a rank has at the size check, from the check's message under a limit far above it.
(ulimit -v 60000000 && exec "$MPIEXEC" --oversubscribe --bind-to none -np 1 "$HPCTRAIN" train $(lm huge.json probe)) \
  >"$WORK/probe.log" 2>&1
vmsize=$(grep -o "minus VmSize [0-9.]* GiB ([0-9]* bytes)" "$WORK/probe.log" | head -1 | grep -o "([0-9]*" | tr -d '(')
params=$("$PY" -c "
v, d, l, p = 1500, 384, 8, 64
print(v * d + p * d + l * (12 * d * d + 13 * d) + 2 * d)")
[[ -n $vmsize ]] && ok "VmSize at the size check: $vmsize bytes; the model: $params parameters" \
  || { bad "no VmSize in the probe's message"; cat "$WORK/probe.log"; finish; exit 1; }
limit_kb=$(( (vmsize + 12 * params) / 1024 ))
limited() { (ulimit -v "$limit_kb" && exec "$@"); }

limited "$MPIEXEC" --oversubscribe --bind-to none -np 4 "$HPCTRAIN" train $(lm big.json s0) --zero-stage 0 \
  >"$WORK/s0.log" 2>&1 && bad "stage 0 trained under ulimit -v $limit_kb" || {
  grep -Eq "the model has $params parameters.* training \(weights, gradients, adamw_torch state\) needs .* but .* are \
available \(the address-space limit RLIMIT_AS \(ulimit -v\)" "$WORK/s0.log" \
    && ok "stage 0 under ulimit -v $limit_kb: refused with the out-of-memory message" \
    || { bad "stage 0: no out-of-memory message"; grep -m3 "error" "$WORK/s0.log"; }; }
run_ok "stage 3 on 4 ranks under ulimit -v $limit_kb trains" "$WORK/s3.log" \
  limited "$MPIEXEC" --oversubscribe --bind-to none -np 4 "$HPCTRAIN" train $(lm big.json s3) --zero-stage 3
[[ -f "$WORK/s3/final/model.safetensors" ]] && ok "stage 3 wrote final/" || bad "no final model at stage 3"
finish
