# `hpctrain estimate-memory --lora-r R [--lora-target-modules ...]` (Note [LoRA memory arithmetic]): the base's
# weights are still held, plus the adapters; gradients and optimizer state only for the adapters and the modules to
# save (PEFT's default: the classifier heads), also under ZeRO; activations as full fine-tuning's; clear errors.
source "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
# The DistilBERT benchmark model (bench/predict): dim 256, 4 layers, 2 labels.
cp "$REPO/bench/predict/distilbert-bench.json" "$WORK/distilbert.json"
cat >"$WORK/gpt2.json" <<'JSON'
{"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "n_embd": 128, "n_layer": 2, "n_head": 4,
 "n_positions": 256, "vocab_size": 1000}
JSON
estimate() { "$HPCTRAIN" estimate-memory --batch-size 4 --sequence-length 64 "$@"; }
for run in "full:distilbert" "lora:distilbert --lora-r 8" "zero:distilbert --lora-r 8 --zero-stage 1 --world-size 2" \
           "gfull:gpt2" "glora:gpt2 --lora-r 4 --lora-target-modules all-linear"; do
  name=${run%%:*} rest=${run#*:}
  model=${rest%% *} args=()
  [[ $rest == *" "* ]] && read -r -a args <<<"${rest#* }"
  estimate --model-config "$WORK/$model.json" "${args[@]}" --json >"$WORK/$name.json" 2>"$WORK/err" \
    || { bad "--json $name"; cat "$WORK/err"; }
done
"$PY" - "$WORK" <<'PYEOF' && ok "LoRA arithmetic: base held, gradients and optimizer state for the adapters and heads only" || bad "LoRA arithmetic"
import json, sys
d = {n: json.load(open(f"{sys.argv[1]}/{n}.json")) for n in ("full", "lora", "zero", "gfull", "glora")}
full, lora = d["full"], d["lora"]
adapters = 4 * 2 * 8 * (256 + 256)                     # 4 layers x q_lin, v_lin x r (in + out)
heads = 256 * 256 + 256 + 2 * 256 + 2                  # pre_classifier and classifier (PEFT's suffix rule)
assert lora["lora_r"] == 8 and "lora_r" not in full
assert lora["parameter_count"] == full["parameter_count"] + adapters, lora["parameter_count"]
assert lora["trainable_parameter_count"] == adapters + heads, lora["trainable_parameter_count"]
b = lora["bytes"]
assert b["parameters"] == 4 * lora["parameter_count"] and b["gradients"] == 4 * (adapters + heads)
assert b["optimizer_state"] == 8 * (adapters + heads), "AdamW: two fp32 moments of the trainable tensors only"
assert b["activations"] == full["bytes"]["activations"]
assert b["total"] == sum(b[k] for k in ("parameters", "gradients", "reducer_buckets", "optimizer_state", "activations"))
assert b["total"] < 0.5 * full["bytes"]["total"] and b["optimizer_state"] < 0.02 * full["bytes"]["optimizer_state"]
z = d["zero"]["bytes"]  # ZeRO-1 over 2 ranks shards the adapters' state
assert z["optimizer_state"] < 0.75 * b["optimizer_state"] and z["parameters"] == b["parameters"], z
g = d["glora"]  # GPT-2 all-linear: c_attn [128 -> 384], attn.c_proj, mlp.c_fc [128 -> 512], mlp.c_proj; no head
per_layer = 4 * ((128 + 384) + (128 + 128) + (128 + 512) + (512 + 128))
assert g["trainable_parameter_count"] == 2 * per_layer, g["trainable_parameter_count"]
assert g["parameter_count"] == d["gfull"]["parameter_count"] + 2 * per_layer
print("distilbert trainable", lora["trainable_parameter_count"], "of", lora["parameter_count"], "; total",
      b["total"], "vs", full["bytes"]["total"])
PYEOF

expect_success "table with --lora-r" estimate --model-config "$WORK/distilbert.json" --lora-r 8
grep -q "LoRA r 8: $((4 * 2 * 8 * 512 + 256 * 256 + 256 + 514)) parameters train" "$WORK/out" && ok "table: LoRA line" \
  || { bad "table: LoRA line"; cat "$WORK/out"; }
expect_failure "unknown target module" "'query' names no linear module of DistilBertForSequenceClassification" \
  estimate --model-config "$WORK/distilbert.json" --lora-r 8 --lora-target-modules query
expect_failure "--lora-target-modules without --lora-r" "needs --lora-r" \
  estimate --model-config "$WORK/distilbert.json" --lora-target-modules q_lin
expect_success "--measure with --lora-r (a LoRA step)" estimate --model-config "$WORK/distilbert.json" --lora-r 8 --measure
grep -q "measured peak" "$WORK/out" && ok "--measure --lora-r: measured peak printed" || { bad "--measure --lora-r"; cat "$WORK/out"; }
finish
