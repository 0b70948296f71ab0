# Supervised fine-tuning on a `prep sft` file (issue 32): the loss is over the loss mask's tokens only (Note
# [Causal-LM labels]), token-exact across ranks and accumulation: 1 rank x 8, 2 ranks x 2 x accumulation 2 and 1 x 1
# x accumulation 8 take the same SGD steps (1e-5) on conversations of many lengths; eval counts exactly the masked
# tokens after each row's first; and (with HPCTRAIN_TRANSFORMERS_PYTHON) one SGD step equals transformers + autograd
# with labels -100 outside the mask (1e-4). `prep sft --packing bfd` rows (several conversations each, masks and
# document boundaries together) take the same step and evaluate alike as the conversations one per row.
source "$(dirname "$0")/lib.sh"
TOK="$REPO/tests/prep/sft/llama3"
"$PY" - "$WORK/chats.jsonl" <<'PYEOF'
import json, random, sys
random.seed(7)
words = "apple pear plum sky sea leaf fire stone wood cloud rain sun moon star tree rock sand red green blue".split()
with open(sys.argv[1], "w") as out:
    for i in range(40):
        turns = []
        for _ in range(random.randint(1, 3)):
            turns.append({"role": "user", "content": "What is " + " ".join(random.sample(words, random.randint(1, 4))) + "?"})
            turns.append({"role": "assistant", "content": " ".join(random.choices(words, k=random.randint(1, 12))) + "."})
        out.write(json.dumps({"messages": turns}) + "\n")
PYEOF
run_ok "prep sft" "$WORK/prep.log" mpi 2 prep sft --no-progress --input "$WORK/chats.jsonl" --tokenizer "$TOK" \
  --validation-fraction 0.25 --seed 3 --max-length 96 --output "$WORK/sft.h5"
VOCAB=$("$PY" -c "import h5py, json, sys; print(json.loads(h5py.File(sys.argv[1], 'r').attrs['tokenizer'])['vocab_size'])" "$WORK/sft.h5")
cat >"$WORK/llama.json" <<JSON
{"model_type": "llama", "vocab_size": $VOCAB, "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
 "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 128, "tie_word_embeddings": false}
JSON
sft_args() {  # sft_args OUTPUT
  echo --data "$WORK/sft.h5" --model-config "$WORK/llama.json" --tokenizer "$TOK" --output "$WORK/$1" --threads 1 \
    --no-progress --logging-steps 1 --optim sgd --lr 0.5 --shuffle global --warmup-steps 0 --eval-steps 100 \
    --report-to none --max-steps 3
}
W=final/model.safetensors
run_ok "1 rank x 8" "$WORK/a.log" mpi 1 train $(sft_args a) --batch-size 8
run_ok "2 ranks x 2 x accumulation 2" "$WORK/b.log" mpi 2 train $(sft_args b) --batch-size 2 --gradient-accumulation-steps 2
run_ok "1 rank x 1 x accumulation 8" "$WORK/c.log" mpi 1 train $(sft_args c) --batch-size 1 --gradient-accumulation-steps 8
compare "$WORK/a/$W" "$WORK/b/$W" 1e-5 && ok "masked loss: 1 x 8 == 2 x 2 x acc 2 (1e-5)" || bad "1 x 8 vs 2 x 2 x acc 2"
compare "$WORK/a/$W" "$WORK/c/$W" 1e-5 && ok "masked loss: 1 x 8 == 1 x 1 x acc 8 (1e-5)" || bad "1 x 8 vs 1 x 1 x acc 8"
# Not vacuous: masks hold fewer tokens than the rows, rows differ in length, the loss moves; eval's token count is the
# masked tokens after each row's first, and its loss is the training's last evaluation (on 1 rank).
run_ok "eval --json on 2 ranks" "$WORK/eval.log" mpi 2 eval --model "$WORK/a/final" --data "$WORK/sft.h5" \
  --split validation --batch-size 3 --threads 1 --json
sed -n '/^{/,/^}/p' "$WORK/eval.log" >"$WORK/eval.json"
"$PY" - "$WORK/sft.h5" "$WORK/a/metrics.jsonl" "$WORK/eval.json" <<'PYEOF' \
  && ok "masked targets < tokens, ragged rows, a moving loss; eval counts the masked tokens, as the last evaluation" \
  || bad "masks / eval tokens"
import h5py, json, sys
f = h5py.File(sys.argv[1], "r")
offsets, mask = f["train/offsets"][:], f["train/loss_mask"][:]
lengths = set((offsets[1:] - offsets[:-1]).tolist())
v_offsets, v_mask = f["validation/offsets"][:], f["validation/loss_mask"][:]
v_targets = int(sum(v_mask[b + 1:e].sum() for b, e in zip(v_offsets[:-1], v_offsets[1:])))
logged = [e for e in map(json.loads, open(sys.argv[2]))]
losses = [e["loss"] for e in logged if "loss" in e]
last_eval = [e["eval_loss"] for e in logged if "eval_loss" in e][-1]
two = json.load(open(sys.argv[3]))
print("targets", int(mask.sum()), "of", len(mask), "lengths", sorted(lengths)[:5], "...", "losses", losses,
      "eval tokens", two["tokens"], "expected", v_targets, "eval loss", two["loss"], "last evaluation", last_eval)
ok = 0 < mask.sum() < 0.8 * len(mask) and len(lengths) > 5 and max(losses) - min(losses) > 1e-3
ok = ok and two["tokens"] == v_targets and abs(two["loss"] - last_eval) <= 1e-6 * max(1, two["loss"])
sys.exit(0 if ok else 1)
PYEOF
# --- prep sft --packing bfd (Note [SFT rows are documents]): a packed row trains as its conversations alone --------
run_ok "prep sft --packing bfd" "$WORK/prep-bfd.log" mpi 2 prep sft --no-progress --input "$WORK/chats.jsonl" \
  --tokenizer "$TOK" --validation-fraction 0.25 --seed 3 --max-length 96 --packing bfd --output "$WORK/bfd.h5"
read -r ROWS EXAMPLES < <("$PY" -c "import h5py, sys
print(*(h5py.File(p, 'r')['train'].attrs['num_examples'] for p in sys.argv[1:]))" "$WORK/bfd.h5" "$WORK/sft.h5")
[[ $ROWS -lt $EXAMPLES ]] && ok "bfd: $EXAMPLES conversations in $ROWS rows" || bad "bfd rows: $ROWS for $EXAMPLES"
one_step() {  # one_step DATA OUTPUT: one SGD step over the whole train split
  echo --data "$WORK/$1.h5" --model-config "$WORK/llama.json" --tokenizer "$TOK" --output "$WORK/$2" --threads 1 \
    --no-progress --optim sgd --lr 0.5 --lr-scheduler constant --max-grad-norm 0 --warmup-steps 0 --eval-steps 100 \
    --report-to none --max-steps 1
}
run_ok "unpacked: 1 rank, the split in one step" "$WORK/u.log" mpi 1 train $(one_step sft u) --batch-size "$EXAMPLES"
run_ok "packed: 2 ranks x accumulation 2" "$WORK/p.log" mpi 2 train $(one_step bfd p) --batch-size $(( (ROWS + 3) / 4 )) \
  --gradient-accumulation-steps 2
compare "$WORK/u/$W" "$WORK/p/$W" 1e-5 && ok "packed SFT step == unpacked step (1e-5): masks and boundaries compose" \
  || bad "packed vs unpacked SFT step"
for data in bfd sft; do
  run_ok "eval --json on the $data validation split" "$WORK/e-$data.log" mpi 1 eval --model "$WORK/u/final" \
    --data "$WORK/$data.h5" --split validation --batch-size 4 --threads 1 --json
  sed -n '/^{/,/^}/p' "$WORK/e-$data.log" >"$WORK/e-$data.json"
done
"$PY" - "$WORK/e-bfd.json" "$WORK/e-sft.json" <<'PYEOF' && ok "eval: packed == unpacked validation (1e-6), the same masked tokens" \
  || bad "eval on packed SFT rows"
import json, sys
packed, unpacked = (json.load(open(p)) for p in sys.argv[1:])
print("packed", packed, "unpacked", unpacked)
sys.exit(0 if packed["tokens"] == unpacked["tokens"] and abs(packed["loss"] - unpacked["loss"]) <= 1e-6 * max(1, unpacked["loss"]) else 1)
PYEOF
if [[ -n "${HPCTRAIN_TRANSFORMERS_PYTHON:-}" ]] && "$HPCTRAIN_TRANSFORMERS_PYTHON" -c 'import transformers, h5py, torch' 2>/dev/null; then
  "$HPCTRAIN_TRANSFORMERS_PYTHON" "$HERE/sft_grad.py" prepare "$WORK" "$WORK/llama.json" >"$WORK/grad.log" 2>&1 \
    || { cat "$WORK/grad.log"; bad "transformers: the base model"; }
  run_ok "one SGD step on the whole train split" "$WORK/one.log" mpi 2 train --model "$WORK/sft-base" --data "$WORK/sft.h5" \
    --tokenizer "$TOK" --output "$WORK/one" --threads 1 --no-progress --optim sgd --lr 0.5 --max-grad-norm 0 \
    --warmup-steps 0 --lr-scheduler constant --max-steps 1 --batch-size 32 --shuffle none --report-to none
  "$HPCTRAIN_TRANSFORMERS_PYTHON" "$HERE/sft_grad.py" check "$WORK" 0.5 >"$WORK/check.log" 2>&1
  cat "$WORK/check.log"
  grep -q '^ok: ' "$WORK/check.log" && ok "one step == transformers + autograd (1e-4)" || bad "one step vs transformers"
else
  echo "skip: one step vs transformers + autograd (set HPCTRAIN_TRANSFORMERS_PYTHON to a python with torch, transformers, h5py)"
fi
finish
