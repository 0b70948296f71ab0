# QLoRA (--quantize-base, Note [Quantized base] in include/hpctrain/models/quantized_linear.hpp) on 2 ranks, with
# ZeRO stage 2 and gradient checkpointing: the frozen layers held in 4-bit form (the log line, metrics.jsonl's
# model_bytes under half the float32 base); exact resume (bitwise adapter and optimizer state); --merge-lora's
# float32 folder == eval --quantize-base --adapter; bf16 autocast with FP4, no double quantization, blocks of 128 and
# SGD; estimate-memory counts the 4-bit base; refusals naming the option or field. Against bitsandbytes and peft:
# mpi.train.qlora_peft.
source "$(dirname "$0")/lib.sh"
make_fixture 0.0

run_ok "base model" "$WORK/base.log" "$HPCTRAIN" train $(train_args "$WORK/base-run") --max-steps 2 --batch-size 8
BASE=$WORK/base-run/final
qlora_args() {
  echo --model "$BASE" --data "$WORK/data.h5" --tokenizer "$WORK/tok" --output "$1" --threads 1 --device cpu \
    --no-progress --logging-steps 1 --lr 5e-3 --shuffle global --lora-r 4 --lora-alpha 8 --eval-steps 100
}
exact=(--quantize-base nf4 --batch-size 4 --save-steps 4 --lr-scheduler constant --zero-stage 2 --gradient-checkpointing)
run_ok "QLoRA, 8 steps, --merge-lora" "$WORK/whole.log" mpi 2 train $(qlora_args "$WORK/whole") "${exact[@]}" \
  --max-steps 8 --merge-lora
run_ok "QLoRA: first 4 steps" "$WORK/pa.log" mpi 2 train $(qlora_args "$WORK/pieces") "${exact[@]}" --max-steps 4
run_ok "QLoRA: --resume auto to 8" "$WORK/pb.log" mpi 2 train $(qlora_args "$WORK/pieces") "${exact[@]}" --max-steps 8 \
  --resume auto
grep -q -- "--quantize-base nf4 --double-quant: 12 frozen layers" "$WORK/whole.log" \
  && ok "the 12 frozen linear layers (not the heads, which train) held in 4-bit form" \
  || { bad "QLoRA layout line"; grep -i quantize "$WORK/whole.log"; }
grep -q "resuming at step 4" "$WORK/pb.log" && ok "resumed from checkpoint-4" || { bad "resume point"; head -20 "$WORK/pb.log"; }
A=final/adapter_model.safetensors
compare "$WORK/whole/$A" "$WORK/pieces/$A" 0 && ok "resumed adapter == uninterrupted adapter (bitwise)" \
  || bad "resumed adapter differs"
compare "$WORK/whole/checkpoint-8/optimizer.safetensors" "$WORK/pieces/checkpoint-8/optimizer.safetensors" 0 \
  && ok "optimizer states equal" || bad "optimizer states differ"
"$PY" - "$WORK/whole" "$BASE" "$HERE" <<'PYEOF' && ok "metrics.jsonl: model_bytes < 0.5 x the float32 base; final/ is an adapter" || bad "model_bytes"
import json, os, sys
sys.path.insert(0, sys.argv[3])
from compare_weights import read
lines = [json.loads(l) for l in open(f"{sys.argv[1]}/metrics.jsonl") if '"loss"' in l]
_, base = read(f"{sys.argv[2]}/model.safetensors")
base_bytes = 4 * sum(t.size for t in base.values())
model_bytes = {e["model_bytes"] for e in lines}
print(f"model_bytes {model_bytes}, float32 base {base_bytes}")
assert len(model_bytes) == 1 and model_bytes.pop() < 0.5 * base_bytes
assert "adapter_model.safetensors" in os.listdir(f"{sys.argv[1]}/final")
PYEOF

# final-merged (dequantized base + B·A, float32) evaluates as the 4-bit base with the adapter.
use=(--data "$WORK/data.h5" --threads 1 --device cpu --json)
"$HPCTRAIN" eval --model "$WORK/whole/final-merged" "${use[@]}" >"$WORK/eval-merged.json" 2>"$WORK/eval-merged.log"
mpi 2 eval --model "$BASE" --adapter "$WORK/whole/final" --quantize-base nf4 "${use[@]}" >"$WORK/eval-q.json" \
  2>"$WORK/eval-q.log"
"$PY" - "$WORK/eval-merged.json" "$WORK/eval-q.json" <<'PYEOF' && ok "eval of final-merged == eval --quantize-base nf4 --adapter" || { bad "merged vs 4-bit eval"; tail -n 5 "$WORK/eval-q.log" "$WORK/eval-merged.log"; }
import json, sys
merged, quantized = (json.load(open(p))["loss"] for p in sys.argv[1:])
print("eval loss: final-merged", merged, "4-bit base + adapter", quantized)
sys.exit(0 if abs(merged - quantized) <= 1e-5 * abs(merged) else 1)
PYEOF

run_ok "QLoRA: FP4, no double quantization, blocks of 128, bf16 autocast, SGD, embeddings" "$WORK/fp4.log" \
  "$HPCTRAIN" train $(qlora_args "$WORK/fp4") --quantize-base fp4 --no-double-quant --quant-blocksize 128 \
  --mixed-precision bf16 --optim sgd --max-steps 2 --batch-size 4 --quantize-embeddings
grep -q -- "--quantize-base fp4 --quantize-embeddings: 13 frozen layers" "$WORK/fp4.log" \
  && ok "fp4 layout line: 12 linear layers and the word embeddings" || bad "fp4 layout line"

# estimate-memory counts the 4-bit base.
estimate=(estimate-memory --model "$BASE" --lora-r 4 --sequence-length 16 --json)
"$HPCTRAIN" "${estimate[@]}" >"$WORK/est-lora.json" 2>"$WORK/est.log"
"$HPCTRAIN" "${estimate[@]}" --quantize-base nf4 >"$WORK/est-qlora.json" 2>>"$WORK/est.log"
"$PY" - "$WORK/est-lora.json" "$WORK/est-qlora.json" <<'PYEOF' && ok "estimate-memory --quantize-base nf4: the 4-bit base" || { bad "estimate-memory"; tail -n 3 "$WORK/est.log"; }
import json, sys
lora, qlora = (json.load(open(p)) for p in sys.argv[1:])
n = qlora["quantized_parameter_count"]
print("parameters bytes: LoRA", lora["bytes"]["parameters"], "QLoRA", qlora["bytes"]["parameters"], "4-bit weights", n)
# 12 frozen layers of 32 x 32 or 32 x 64: 4 bytes each become 0.5 + 1/64 + 4/(64 * 256) (+ 4 per layer)
expected = lora["bytes"]["parameters"] - 4 * n + n // 2 + n // 64 + 4 * 12 + 4 * 12
sys.exit(0 if n == 2 * (4 * 32 * 32 + 2 * 32 * 64) and qlora["bytes"]["parameters"] == expected else 1)
PYEOF

# The measured step (estimate-memory --measure, 1 rank) on a Llama whose linear layers hold most of its bytes (width
# 512, 2 layers, vocabulary 256: 6.3 M of its 6.6 M parameters): the model's bytes under 0.3 x and the QLoRA step's
# peak resident growth under 0.8 x the LoRA step's over the float32 base (measured 0.18 and 0.66; before the float32
# weights the 4-bit ones replace were returned to the OS, the QLoRA step's peak was about the float32 model's).
cat >"$WORK/llama-mid.json" <<'JSON'
{"model_type": "llama", "vocab_size": 256, "hidden_size": 512, "intermediate_size": 1536, "num_hidden_layers": 2,
 "num_attention_heads": 8, "num_key_value_heads": 4, "max_position_embeddings": 64, "tie_word_embeddings": false}
JSON
measure=(estimate-memory --model-config "$WORK/llama-mid.json" --lora-r 8 --lora-target-modules all-linear \
  --batch-size 1 --sequence-length 32 --threads 1 --measure --json)
"$HPCTRAIN" "${measure[@]}" >"$WORK/measure-lora.json" 2>"$WORK/measure.log"
"$HPCTRAIN" "${measure[@]}" --quantize-base nf4 >"$WORK/measure-qlora.json" 2>>"$WORK/measure.log"
"$HPCTRAIN" "${measure[@]}" --quantize-base nf4 --quantize-embeddings >"$WORK/measure-qemb.json" 2>>"$WORK/measure.log"
"$PY" - "$WORK/measure-lora.json" "$WORK/measure-qlora.json" "$WORK/llama-mid.json" "$WORK/measure-qemb.json" <<'PYEOF' && ok "measured QLoRA model < 0.3 x, step peak < 0.8 x the LoRA step's; the estimate's 4-bit weights are the layers' (not lm_head; with --quantize-embeddings also it and embed_tokens, and fewer bytes)" || { bad "measured step peaks"; tail -n 3 "$WORK/measure.log"; }
import json, sys
lora, qlora = (json.load(open(p))["measured"] for p in sys.argv[1:3])
print("measured step peak: LoRA", lora["peak_bytes"], "QLoRA", qlora["peak_bytes"], "model bytes", lora["model_bytes"],
      qlora["model_bytes"])
ok = qlora["peak_bytes"] < 0.8 * lora["peak_bytes"] and qlora["model_bytes"] < 0.3 * lora["model_bytes"]
# The estimate counts in 4-bit form what quantize_frozen_base quantizes: the layers' linear weights, not the head.
c, estimate = json.load(open(sys.argv[3])), json.load(open(sys.argv[2]))
h, i, kv = c["hidden_size"], c["intermediate_size"], c["hidden_size"] * c["num_key_value_heads"] // c["num_attention_heads"]
layers = c["num_hidden_layers"] * (2 * h * h + 2 * h * kv + 3 * h * i)
# The largest layer's weight dequantized whole for its product, unless the products are fused (Note [Fused 4-bit
# product]: float32 on an AVX-512 CPU).
print("estimate's 4-bit weights", estimate["quantized_parameter_count"], "the layers'", layers,
      "dequantized weight bytes", estimate["bytes"]["dequantized_weight"], "largest layer weight bytes", 4 * h * i,
      "fused products", estimate["fused_4bit_products"])
dequantized = 0 if estimate["fused_4bit_products"] else 4 * h * i
ok = ok and estimate["quantized_parameter_count"] == layers and estimate["bytes"]["dequantized_weight"] == dequantized
# --quantize-embeddings (Note [Quantized embeddings]): embed_tokens and lm_head in 4 bits too; the head, a fused
# product too, is dequantized whole only where the products are not fused.
emb = json.load(open(sys.argv[4]))
vocabulary = 2 * c["vocab_size"] * h
print("with the embeddings: 4-bit weights", emb["quantized_parameter_count"], "model bytes",
      emb["measured"]["model_bytes"], "dequantized weight bytes", emb["bytes"]["dequantized_weight"])
ok = ok and emb["quantized_parameter_count"] == layers + vocabulary
head = 0 if emb["fused_4bit_products"] else 4 * max(h * i, c["vocab_size"] * h)
ok = ok and emb["bytes"]["dequantized_weight"] == head
ok = ok and emb["measured"]["model_bytes"] < qlora["model_bytes"] - 3 * vocabulary  # 4 bytes each became about 0.52
sys.exit(0 if ok else 1)
PYEOF

# Note [Quantized at load]: a QLoRA run never holds its base in float32. On a Llama of 82 MB in float32 (width 512,
# 6 layers; each layer read from the mapped file, quantized and freed in turn), the QLoRA process's peak resident set
# is at least 0.6 x that size below the LoRA process's (before, both built the whole float32 model first).
make_lm_fixture
cat >"$WORK/llama-load.json" <<'JSON'
{"model_type": "llama", "vocab_size": 1500, "hidden_size": 512, "intermediate_size": 1536, "num_hidden_layers": 6,
 "num_attention_heads": 8, "num_key_value_heads": 4, "max_position_embeddings": 64, "tie_word_embeddings": false}
JSON
run_ok "the 82 MB Llama base" "$WORK/load-base.log" "$HPCTRAIN" train --model-config "$WORK/llama-load.json" \
  --data "$WORK/packed.h5" --tokenizer "$BPE" --output "$WORK/load-base" --threads 1 --no-progress --max-steps 1 \
  --batch-size 2 --report-to none
"$PY" - "$HPCTRAIN" "$WORK" "$BPE" <<'PYEOF' && ok "QLoRA's peak RSS is the 4-bit model's, not the float32 model's" || bad "QLoRA load peak"
import subprocess, sys
hpctrain, work, tokenizer = sys.argv[1:]
def peak(side, extra):  # the largest resident set of one `hpctrain train` process, in bytes (-1: it failed)
    args = [hpctrain, "train", "--model", f"{work}/load-base/final", "--data", f"{work}/packed.h5",
            "--tokenizer", tokenizer, "--output", f"{work}/load-{side}", "--threads", "1", "--no-progress",
            "--max-steps", "1", "--batch-size", "2", "--lora-r", "4", "--lora-target-modules", "all-linear",
            "--report-to", "none"] + extra
    code = ("import resource, subprocess, sys; r = subprocess.run(sys.argv[1:], capture_output=True, text=True); "
            "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss if r.returncode == 0 else -1); "
            "sys.stderr.write(r.stderr[-2000:] if r.returncode else '')")
    out = subprocess.run([sys.executable, "-c", code] + args, capture_output=True, text=True)
    sys.stderr.write(out.stderr)
    return int(out.stdout.strip()) * 1024
lora, qlora = peak("lora", []), peak("qlora", ["--quantize-base", "nf4"])
float32 = 4 * (2 * 1500 * 512 + 6 * (2 * 512 * 512 + 2 * 512 * 256 + 3 * 512 * 1536))
print(f"peak RSS: LoRA {lora / 2**20:.1f} MiB, QLoRA {qlora / 2**20:.1f} MiB; the float32 model {float32 / 2**20:.1f} MiB")
sys.exit(0 if lora > 0 and qlora > 0 and lora - qlora > 0.6 * float32 else 1)
PYEOF

# generate quantizes at load too (models::load_quantized_with_adapter): the QLoRA adapter just trained on the 82 MB base
# generates 4 greedy tokens over the 4-bit base, which the log reports.
gen_q=(generate --model "$WORK/load-base/final" --adapter "$WORK/load-qlora/final" --quantize-base nf4 --tokenizer "$BPE"
  --prompt "The cat" --max-new-tokens 4 --threads 1)
"$HPCTRAIN" "${gen_q[@]}" --json >"$WORK/gen-q.json" 2>"$WORK/gen-q.err"
"$HPCTRAIN" "${gen_q[@]}" >"$WORK/gen-q.log" 2>&1  # without --json the load's notes are logged
"$PY" - "$WORK/gen-q.json" "$WORK/gen-q.log" <<'PYEOF' && ok "generate --quantize-base nf4 --adapter: 4 new tokens over the 4-bit base" || { bad "generate over a 4-bit base"; tail -n 5 "$WORK/gen-q.log"; }
import json, sys
out, log = json.load(open(sys.argv[1])), open(sys.argv[2]).read()
print("new ids", out["new_ids"])
sys.exit(0 if len(out["new_ids"]) == 4 and "--quantize-base nf4 --double-quant: 42 frozen layers" in log else 1)
PYEOF

# Refusals name the option or the field.
refused() {  # refused NAME EXPECTED-TEXT ARGS...: exits non-zero and prints the text
  local name=$1 text=$2; shift 2
  if "$@" >"$WORK/refused.log" 2>&1; then bad "$name: accepted"
  elif grep -qF -- "$text" "$WORK/refused.log"; then ok "$name"
  else bad "$name: message"; tail -3 "$WORK/refused.log"; fi
}
plain=(--model "$BASE" --data "$WORK/data.h5" --tokenizer "$WORK/tok" --output "$WORK/refused" --threads 1 --no-progress)
refused "--quantize-base without --lora-r" "--quantize-base nf4 needs --lora-r R (> 0)" \
  "$HPCTRAIN" train "${plain[@]}" --quantize-base nf4
refused "--quant-blocksize 48" "--quant-blocksize 48: expected a power of two" \
  "$HPCTRAIN" train "${plain[@]}" --lora-r 4 --quantize-base nf4 --quant-blocksize 48
refused "--no-double-quant without --quantize-base" "need --quantize-base nf4|fp4" \
  "$HPCTRAIN" train "${plain[@]}" --lora-r 4 --no-double-quant
refused "--quantize-embeddings without --quantize-base" "need --quantize-base nf4|fp4" \
  "$HPCTRAIN" train "${plain[@]}" --lora-r 4 --quantize-embeddings
refused "--quantize-base int4" "--quantize-base 'int4': expected nf4 or fp4" \
  "$HPCTRAIN" train "${plain[@]}" --lora-r 4 --quantize-base int4
cp -r "$BASE" "$WORK/prequantized"
"$PY" - "$WORK/prequantized/config.json" <<'PYEOF'
import json, sys
c = json.load(open(sys.argv[1])); c["quantization_config"] = {"quant_method": "bitsandbytes", "load_in_4bit": True}
json.dump(c, open(sys.argv[1], "w"))
PYEOF
refused "a base with quantization_config" "config.json': quantization_config (quant_method bitsandbytes)" \
  "$HPCTRAIN" train "${plain[@]/$BASE/$WORK/prequantized}" --lora-r 4 --quantize-base nf4
refused "eval --quantize-base without --adapter" "--quantize-base nf4 needs --adapter DIR" \
  "$HPCTRAIN" eval --model "$BASE" --data "$WORK/data.h5" --quantize-base nf4
refused "estimate-memory --quantize-base without --lora-r" "--quantize-base nf4 needs --lora-r R (> 0)" \
  "$HPCTRAIN" estimate-memory --model "$BASE" --quantize-base nf4
finish
