# --loss-chunk-tokens (issue 34, Note [Chunked loss]): `train` with the chunked loss takes the steps of the
# unchunked one — the same loss and gradient norm at every step (1e-6) and the same weights (1e-5) — for GPT-2
# (tied head) on 2 ranks, on rows of different lengths (padding: masked labels); `eval` on 2 ranks reports the
# same loss either way; a negative value is refused naming the option. (Every gradient on 1 rank: models'
# chunked_loss tests; on 2 ranks through the reducer, Llama and Qwen2 too: mpi.train.chunked_loss_gradients.)
source "$(dirname "$0")/lib.sh"
make_lm_fixture  # docs.jsonl, gpt2.json, llama.json
"$HPCTRAIN" prep lm --no-progress --input "$WORK/docs.jsonl" --text-field text --tokenizer "$BPE" \
  --validation-fraction 0.2 --seed 4 --packing none --max-length 24 --output "$WORK/ragged.h5" >"$WORK/prep.log" 2>&1 \
  || { cat "$WORK/prep.log"; exit 1; }
lm_args() {  # lm_args CONFIG OUTPUT
  echo --data "$WORK/ragged.h5" --model-config "$WORK/$1" --tokenizer "$BPE" --output "$WORK/$2" --threads 1 \
    --no-progress --logging-steps 1 --lr 5e-3 --shuffle global --warmup-steps 1 --eval-steps 100 --max-steps 3 \
    --report-to none
}
# same_steps A B: every step's loss and grad_norm in A/metrics.jsonl equal B's within 1e-6 relative.
same_steps() {
  "$PY" - "$WORK/$1/metrics.jsonl" "$WORK/$2/metrics.jsonl" <<'PYEOF'
import json, sys
a, b = ([(e["loss"], e["grad_norm"]) for e in map(json.loads, open(p)) if "loss" in e] for p in sys.argv[1:])
print(a, b)
sys.exit(0 if len(a) == len(b) == 3 and all(abs(x - y) <= 1e-6 * abs(y) for s, t in zip(a, b) for x, y in zip(s, t)) else 1)
PYEOF
}
W=final/model.safetensors

run_ok "gpt2, 2 ranks: --loss-chunk-tokens 3" "$WORK/g3.log" mpi 2 train $(lm_args gpt2.json g3) --batch-size 2 \
  --loss-chunk-tokens 3
run_ok "gpt2, 2 ranks: --loss-chunk-tokens 0 (unchunked)" "$WORK/g0.log" mpi 2 train $(lm_args gpt2.json g0) \
  --batch-size 2 --loss-chunk-tokens 0
same_steps g3 g0 && ok "gpt2, 2 ranks: chunked == unchunked loss and gradient norm at every step (1e-6)" \
  || bad "gpt2: chunked vs unchunked steps"
compare "$WORK/g3/$W" "$WORK/g0/$W" 1e-5 && ok "gpt2, 2 ranks: the same weights (1e-5)" || bad "gpt2: weights differ"

for chunk in 2 0; do
  run_ok "eval on 2 ranks, --loss-chunk-tokens $chunk" "$WORK/eval$chunk.log" mpi 2 eval --model "$WORK/g3/final" \
    --data "$WORK/ragged.h5" --split validation --batch-size 3 --threads 1 --json --loss-chunk-tokens "$chunk"
  sed -n '/^{/,/^}/p' "$WORK/eval$chunk.log" >"$WORK/eval$chunk.json"
done
"$PY" - "$WORK/eval2.json" "$WORK/eval0.json" <<'PYEOF' && ok "eval: the same loss and tokens chunked and unchunked" \
  || bad "eval: chunked vs unchunked"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
print(a, b)
sys.exit(0 if a["tokens"] == b["tokens"] > 0 and abs(a["loss"] - b["loss"]) <= 1e-6 * b["loss"] else 1)
PYEOF

if mpi 1 train $(lm_args gpt2.json bad) --loss-chunk-tokens -1 >"$WORK/bad.log" 2>&1; then bad "--loss-chunk-tokens -1 accepted"
elif grep -q -- "--loss-chunk-tokens -1: expected tokens per chunk >= 1, or 0" "$WORK/bad.log"; then ok "--loss-chunk-tokens -1 refused"
else bad "--loss-chunk-tokens -1 message"; tail -5 "$WORK/bad.log"; fi
finish
