# `hpctrain predict`, `eval` and `inspect MODEL_DIR` on the tiny golden checkpoints (F32, F16, BF16; DistilBERT
# and BERT): logits within 1e-4 of the independent PyTorch reference, and `mpirun -np 2` equal to one rank.
source "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
GOLDEN="$REPO/tests/models/golden"
MPIRUN=(mpirun --oversubscribe --bind-to none -np 2)

for name in tiny-distilbert-f32 tiny-distilbert-f16 tiny-distilbert-bf16 tiny-bert-f32 tiny-bert-f16 tiny-bert-bf16; do
  "$PY" "$(dirname "$0")/make_golden_dataset.py" "$GOLDEN/golden.json" "$name" "$WORK/$name.h5" "$WORK/$name.expected.json"
  expect_success "$name: predict" "$HPCTRAIN" predict --model "$GOLDEN/$name" --data "$WORK/$name.h5" --split validation \
    --batch-size 3 --threads 1 --output "$WORK/$name.preds.jsonl"
  "$PY" - "$WORK/$name.preds.jsonl" "$WORK/$name.expected.json" <<'PYEOF' && ok "$name: logits within 1e-4 of the reference" || bad "$name: logits"
import json, sys
preds = [json.loads(l) for l in open(sys.argv[1])]
expected = json.load(open(sys.argv[2]))
assert [p["index"] for p in preds] == list(range(len(expected))), "not one line per example in stored order"
assert [p["source_index"] for p in preds] == [i + 100 for i in range(len(expected))], "source_index"
worst = max(abs(a - b) for p, e in zip(preds, expected) for a, b in zip(p["logits"], e))
names = ["negative", "neutral", "positive"]
assert all(p["label"] == names[max(range(3), key=lambda k: p["logits"][k])] for p in preds), "label is not the argmax"
assert worst <= 1e-4, f"max |logit difference| = {worst}"
PYEOF
done

# Two ranks: the same predictions, in the same order, each example once; eval totals identical.
name=tiny-bert-f32
expect_success "predict under mpirun -np 2" "${MPIRUN[@]}" "$HPCTRAIN" predict --model "$GOLDEN/$name" --data "$WORK/$name.h5" \
  --split validation --batch-size 2 --threads 1 --output "$WORK/np2.jsonl"
"$PY" - "$WORK/$name.preds.jsonl" "$WORK/np2.jsonl" <<'PYEOF' && ok "2 ranks predict what 1 rank predicts" || bad "2-rank predictions differ"
import json, sys
one = [json.loads(l) for l in open(sys.argv[1])]
two = [json.loads(l) for l in open(sys.argv[2])]
assert [p["index"] for p in two] == [p["index"] for p in one]
assert max(abs(a - b) for p, q in zip(one, two) for a, b in zip(p["logits"], q["logits"])) <= 1e-5
PYEOF
expect_success "eval, 1 rank" "$HPCTRAIN" eval --model "$GOLDEN/$name" --data "$WORK/$name.h5" --batch-size 4 --threads 1 --json
cp "$WORK/out" "$WORK/eval1.json"
expect_success "eval under mpirun -np 2" "${MPIRUN[@]}" "$HPCTRAIN" eval --model "$GOLDEN/$name" --data "$WORK/$name.h5" --batch-size 1 --threads 1 --json
"$PY" - "$WORK/eval1.json" "$WORK/out" "$WORK/$name.expected.json" <<'PYEOF' && ok "eval: exact totals across ranks" || bad "eval totals differ"
import json, sys
a, b, expected = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), json.load(open(sys.argv[3]))
assert a["examples"] == b["examples"] == len(expected), (a["examples"], b["examples"], len(expected))
assert a["confusion_matrix"] == b["confusion_matrix"]
assert abs(a["loss"] - b["loss"]) < 1e-6 and a["accuracy"] == b["accuracy"]
PYEOF
expect_success "eval text report" "$HPCTRAIN" eval --model "$GOLDEN/$name" --data "$WORK/$name.h5" --threads 1
grep -q "confusion matrix" "$WORK/out" && grep -q "macro-F1" "$WORK/out" && ok "eval prints metrics and confusion matrix" || { bad "eval text"; cat "$WORK/out"; }

# Errors: a dataset whose label count differs from the model's; a missing model folder.
"$PY" -c "import h5py,json; f=h5py.File('$WORK/$name.h5','a'); f.attrs['label_names']=json.dumps(['a','b','c','d'])"
expect_failure "label count mismatch" 'has 4 labels but the model .* has 3' "$HPCTRAIN" eval --model "$GOLDEN/$name" --data "$WORK/$name.h5"
expect_failure "missing model folder" 'nope' "$HPCTRAIN" predict --model "$WORK/nope" --data "$WORK/$name.h5" --output "$WORK/x.jsonl"
expect_no_file "failed predict writes nothing" "$WORK/x.jsonl"
expect_failure "error under mpirun ends the job" 'nope' timeout 60 "${MPIRUN[@]}" "$HPCTRAIN" eval --model "$WORK/nope" --data "$WORK/$name.h5"

# inspect a model folder: config, parameter counts, dtypes, head status.
expect_success "inspect model" "$HPCTRAIN" inspect "$GOLDEN/tiny-distilbert-bf16"
grep -q "DistilBertConfig" "$WORK/out" && grep -q "BFloat16" "$WORK/out" && grep -q "head          present" "$WORK/out" \
  && ok "inspect shows config, stored dtype and head" || { bad "inspect model"; cat "$WORK/out"; }
expect_success "inspect base checkpoint" "$HPCTRAIN" inspect "$GOLDEN/tiny-distilbert-mlm" --json
"$PY" -c "import json,sys; d=json.load(open('$WORK/out')); sys.exit(0 if d['head'].startswith('will be initialized') and d['parameters']>0 else 1)" \
  && ok "inspect reports a head to initialize" || { bad "inspect base"; cat "$WORK/out"; }

# inspect a causal LM: transformers' config class, the architecture, parameters by module summing to the stored
# tensors', and the head: GPT-2's tied to the embedding (no lm_head parameter), this Llama's untied.
expect_success "inspect GPT-2" "$HPCTRAIN" inspect "$GOLDEN/tiny-gpt2-bf16"
grep -q "^GPT2Config {" "$WORK/out" && grep -q "^architecture  GPT2LMHeadModel" "$WORK/out" && grep -q "BFloat16" "$WORK/out" \
  && grep -q "^head          tied: lm_head is the input embedding (vocabulary" "$WORK/out" \
  && ok "inspect GPT-2: config class, architecture, stored dtype, tied head" || { bad "inspect GPT-2"; cat "$WORK/out"; }
for name in tiny-gpt2-bf16 tiny-llama-gqa-llama3; do
  expect_success "inspect $name --json" "$HPCTRAIN" inspect "$GOLDEN/$name" --json
  "$PY" - "$WORK/out" "$GOLDEN/$name/model.safetensors" "$name" <<'PYEOF' && ok "inspect $name: parameters by module, head" \
    || { bad "inspect $name --json"; cat "$WORK/out"; }
import json, math, struct, sys
d = json.load(open(sys.argv[1]))
with open(sys.argv[2], "rb") as f:
    header = json.loads(f.read(struct.unpack("<Q", f.read(8))[0]))
stored = {k: math.prod(v["shape"]) for k, v in header.items() if k != "__metadata__"}
by_module = d["parameters_by_module"]
print(d["architecture"], d["parameters"], by_module, d["head"])
assert d["parameters"] == sum(by_module.values()) == sum(stored.values()), (d["parameters"], sum(stored.values()))
if sys.argv[3].startswith("tiny-gpt2"):
    assert d["architecture"] == "GPT2LMHeadModel" and "lm_head" not in by_module and d["head"].startswith("tied")
    assert {"transformer.h", "transformer.wte", "transformer.wpe", "transformer.ln_f"} <= set(by_module)
else:
    assert d["architecture"] == "LlamaForCausalLM" and by_module["lm_head"] == stored["lm_head.weight"]
    assert d["head"].startswith("present: lm_head") and {"model.layers", "model.embed_tokens", "model.norm"} <= set(by_module)
PYEOF
done

finish
