# `hpctrain estimate-memory`: the table's rows, the JSON's arithmetic (parameters x 4, the optimizers' state,
# checkpointing), --measure within 25 % of one real step's peak (and, with bf16 and checkpointing, a smaller one),
# causal LMs (GPT-2, Llama; chunked and unchunked loss) within 10 %, and clear errors for bad options.
source "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
# The DistilBERT-style benchmark model (bench/models): dim 256, 4 layers, 11.2 M parameters.
cat >"$WORK/config.json" <<'JSON'
{"model_type": "distilbert", "architectures": ["DistilBertForSequenceClassification"], "dim": 256, "n_layers": 4,
 "n_heads": 4, "hidden_dim": 1024, "vocab_size": 30522, "max_position_embeddings": 512,
 "id2label": {"0": "a", "1": "b"}, "label2id": {"a": 0, "b": 1}}
JSON
ESTIMATE=("$HPCTRAIN" estimate-memory --model-config "$WORK/config.json" --batch-size 16 --sequence-length 128)

expect_success "table" "${ESTIMATE[@]}"
for row in "parameters" "gradients" "reducer buckets" "optimizer state" "activations (4 layers)" "per layer" "total"; do
  if grep -q "^  *$row " "$WORK/out"; then ok "table row '$row'"; else bad "table row '$row'"; cat "$WORK/out"; fi
done

for variant in adamw adamw_8bit adafactor ckpt; do
  case $variant in
    ckpt) args=(--gradient-checkpointing) ;;
    *) args=(--optim "$variant") ;;
  esac
  "${ESTIMATE[@]}" "${args[@]}" --json >"$WORK/$variant.json" 2>"$WORK/err" || { bad "--json $variant"; cat "$WORK/err"; }
done
"$PY" - "$WORK" <<'PYEOF' && ok "JSON arithmetic" || bad "JSON arithmetic"
import json, sys
d = {v: json.load(open(f"{sys.argv[1]}/{v}.json")) for v in ("adamw", "adamw_8bit", "adafactor", "ckpt")}
a = d["adamw"]
b = a["bytes"]
assert a["parameter_count"] == 11170562, a["parameter_count"]  # what the model's named_parameters() hold
assert b["parameters"] == b["gradients"] == 4 * a["parameter_count"]
assert b["optimizer_state"] == 2 * b["parameters"], "AdamW keeps two fp32 moments"
assert b["total"] == sum(b[k] for k in ("parameters", "gradients", "reducer_buckets", "optimizer_state", "activations"))
assert d["adamw_8bit"]["optimizer"] == "adamw_bnb_8bit"
assert d["adamw_8bit"]["bytes"]["optimizer_state"] <= 0.30 * b["optimizer_state"]
assert d["adafactor"]["bytes"]["optimizer_state"] <= 0.05 * b["optimizer_state"]
act, ckpt = a["activations"], d["ckpt"]["activations"]
assert act["per_layer"] == 16 * 128 * (9 * 256 + 2 * 1024) * 4 + 16 * 128 * (4 * 4 + 4), act
assert ckpt["kept"] < act["kept"] and d["ckpt"]["bytes"]["activations"] < b["activations"]
PYEOF

if [[ -n ${HPCTRAIN_SANITIZED:-} ]]; then  # scripts/sanitize.sh: ASan's shadow memory is in the RSS
  expect_success "--measure runs (under sanitizers the figure is not compared)" "${ESTIMATE[@]}" --measure --threads 1
else
  expect_success "--measure within 25 %" "${ESTIMATE[@]}" --measure --tolerance 0.25 --threads 1
fi
if grep -q "measured peak (RSS growth)" "$WORK/out"; then ok "--measure prints the peak"; else bad "--measure output"; cat "$WORK/out"; fi
# --measure runs the step `train` would run: with bf16 autocast and recomputed layers the measured peak falls, and
# by more than the parameters' bf16 copies could explain if only one of the two took effect (seq 128: fp32 about
# 340 MiB; bf16 + checkpointing about 60 % of it).
if [[ -z ${HPCTRAIN_SANITIZED:-} ]]; then
  for variant in fp32 lean; do
    args=()
    [[ $variant == lean ]] && args=(--precision bf16 --gradient-checkpointing)
    "${ESTIMATE[@]}" "${args[@]}" --measure --threads 1 --json >"$WORK/measure-$variant.json" 2>"$WORK/err" ||
      { bad "--measure $variant"; cat "$WORK/err"; }
  done
  "$PY" - "$WORK" <<'PYEOF' && ok "--measure with bf16 + checkpointing measures a smaller step" || bad "--measure bf16 + checkpointing"
import json, sys
peak = {v: json.load(open(f"{sys.argv[1]}/measure-{v}.json"))["measured"]["peak_bytes"] for v in ("fp32", "lean")}
print(peak)
assert peak["lean"] < 0.8 * peak["fp32"], peak
PYEOF
fi

# Causal LMs (issues 21 and 34): a GPT-2-style (tied head, vocabulary 50257) and a Llama-style model (4 heads / 2 KV
# heads, SwiGLU, untied head, vocabulary 32000) at batch 8 x 128 tokens, where the head's logits dominate unless the
# loss is chunked (Note [Chunked loss]): --measure within 10 % in fp32 and bf16, with and without checkpointing, and
# with --loss-chunk-tokens 0 (unchunked); the JSON's terms follow Note [Decoder activation arithmetic].
cat >"$WORK/gpt2.json" <<'JSON'
{"model_type": "gpt2", "n_embd": 256, "n_layer": 4, "n_head": 4, "vocab_size": 50257, "n_positions": 1024}
JSON
cat >"$WORK/llama.json" <<'JSON'
{"model_type": "llama", "hidden_size": 256, "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2,
 "intermediate_size": 688, "vocab_size": 32000, "max_position_embeddings": 512}
JSON
for model in gpt2 llama; do
  for variant in fp32 fp32-ckpt bf16 bf16-ckpt fp32-unchunked; do
    name="$model-$variant"
    args=(--precision "${variant%%-*}")
    [[ $variant == *-ckpt ]] && args+=(--gradient-checkpointing)
    [[ $variant == *-unchunked ]] && args+=(--loss-chunk-tokens 0)
    lm=("$HPCTRAIN" estimate-memory --model-config "$WORK/$model.json" --batch-size 8 --sequence-length 128
        "${args[@]}" --threads 1 --json)
    if [[ -n ${HPCTRAIN_SANITIZED:-} ]]; then "${lm[@]}" >"$WORK/$name.json" 2>"$WORK/err"; else
      "${lm[@]}" --measure --tolerance 0.10 >"$WORK/$name.json" 2>"$WORK/err"; fi
    rc=$?
    error=$("$PY" -c "import json,sys; print('%+.1f %%' % (100 * json.load(open(sys.argv[1]))['measured']['relative_error']))" \
      "$WORK/$name.json" 2>/dev/null)
    [[ $rc -eq 0 ]] && ok "$name: estimate within 10 % of --measure (${error:-not measured})" \
      || { bad "$name: estimate vs --measure (${error:-no result})"; cat "$WORK/err"; }
  done
done
"$PY" - "$WORK" <<'PYEOF' && ok "causal LMs: the loss and embedding terms, checkpointing and bf16 in the JSON" || bad "causal-LM JSON arithmetic"
import json, sys
for model, vocab, tied in (("gpt2", 50257, True), ("llama", 32000, False)):
    d = {v: json.load(open(f"{sys.argv[1]}/{model}-{v}.json")) for v in ("fp32", "fp32-ckpt", "bf16", "bf16-ckpt", "fp32-unchunked")}
    tokens, kept = 8 * 128, 8 * 127  # every position but each row's last predicts a token
    act = d["fp32-unchunked"]["activations"]
    assert act["logits"] == (tokens + kept) * 256 * 4 + 3 * kept * vocab * 4, (model, act)  # backward's three [n, V]
    assert act["embedding_gradients"] == (3 if tied else 1) * vocab * 256 * 4, (model, act)
    for precision in ("fp32", "bf16"):
        act = d[precision]["activations"]
        assert act["logits"] < d["fp32-unchunked"]["activations"]["logits"] / 3, (model, act)  # no [n, V] tensor
        assert d[precision]["bytes"]["activations"] == max(act["kept"] + act["embeddings_and_head"] + max(
            act["logits"], act["backward_transient"]), act["embedding_gradients"]), act
        ckpt = d[precision + "-ckpt"]["activations"]
        assert ckpt["kept"] == 4 * 8 * 128 * 256 * 4 < act["kept"], (ckpt, act)  # the fp32 residual stream per layer
    assert d["bf16"]["activations"]["per_layer"] < d["fp32"]["activations"]["per_layer"]
    print(model, {v: e["bytes"]["activations"] for v, e in d.items()})
PYEOF

expect_failure "both model options" "exactly one of --model DIR and --model-config FILE" \
  "$HPCTRAIN" estimate-memory --model "$WORK" --model-config "$WORK/config.json"
expect_failure "unknown precision" "--precision 'fp16': expected fp32 or bf16" "${ESTIMATE[@]}" --precision fp16
expect_failure "unknown optimizer" "--optim 'lion': unknown optimizer" "${ESTIMATE[@]}" --optim lion
expect_failure "zero batch" "--batch-size 0: expected a positive number" \
  "$HPCTRAIN" estimate-memory --model-config "$WORK/config.json" --batch-size 0
expect_failure "too long" "--sequence-length 513 exceeds the model's max_position_embeddings 512" \
  "$HPCTRAIN" estimate-memory --model-config "$WORK/config.json" --sequence-length 513
expect_failure "too long for GPT-2" "--sequence-length 1025 exceeds the model's n_positions 1024" \
  "$HPCTRAIN" estimate-memory --model-config "$WORK/gpt2.json" --sequence-length 1025
expect_failure "negative chunk" "--loss-chunk-tokens -1: expected tokens per chunk >= 1, or 0 for the unchunked loss" \
  "$HPCTRAIN" estimate-memory --model-config "$WORK/gpt2.json" --loss-chunk-tokens -1
finish
