#!/usr/bin/env bash
# Issue 35's QLoRA benchmark (bench/README.md, "QLoRA"), 1 rank x 1 thread:
#   memory: `hpctrain estimate-memory --measure` runs one training step of LoRA (r 16, alpha 32, all-linear) on the
#           Llama-shaped CONFIG (default bench/qlora/llama-350m.json: width 1024, 24 layers, 16 heads / 8 KV heads,
#           MLP 2816, vocabulary 32000, untied: 346 M parameters, random weights) with and without --quantize-base nf4:
#           the model's resident bytes (its parameters and buffers) and the step's measured peak (RSS growth over the
#           process before the model; QLoRA's counted from the model as quantized, not from the float32 weights it was
#           built in), and again with --quantize-embeddings (the token embedding and LM head in 4 bits too); MEMORY_ARGS
#           adds options to the three steps (e.g. "--gradient-checkpointing --precision bf16");
#   speed:  the same model saved in bf16 by transformers; `hpctrain train --quantize-base nf4` against peer.py
#           (transformers + peft + bitsandbytes, BitsAndBytesConfig nf4 + double quantization, compute dtype float32:
#           the same dtype as hpctrain's), the same LoRA, AdamW (lr 1e-4, no weight decay, norm clipped at 1), batch
#           BATCH rows of LENGTH random token ids; WARMUP steps, then STEPS timed steps (hpctrain: metrics.jsonl's
#           per-step time; peer: each step timed alone); the two sides alternate, the first side rotating each round.
#   kernel: bench_fused_product (BUILD_DIR/bench/, bench_fused_product.cpp): the 4-bit base's products alone, over
#           the layers of the same shape at LENGTH tokens, fused against dequantize-then-BLAS, ROUNDS rounds (not in
#           the default PARTS: no peer from Python; build it with scripts/build.sh --target bench_fused_product).
# Usage: bench/qlora/run.sh [BUILD_DIR=build] [ROUNDS=3] [STEPS=3] [WARMUP=1]
# Environment: PYTHON (torch 2.x, transformers, peft, bitsandbytes, h5py; default .venv-torch2/bin/python), CONFIG,
# BATCH (1), LENGTH (128), PARTS ("memory speed"), MEMORY_ARGS (""), RESULTS (a JSON-lines file to append the runs to).
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
rounds=${2:-3}
steps=${3:-3}
warmup=${4:-1}
python=${PYTHON:-.venv-torch2/bin/python}
config=${CONFIG:-bench/qlora/llama-350m.json}
batch=${BATCH:-1}
length=${LENGTH:-128}
read -r -a parts <<<"${PARTS:-memory speed}"
# shellcheck source=../machine.sh
source bench/machine.sh
bench_workspace qlora "$build"
export OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
lora=(--lora-r 16 --lora-target-modules all-linear)

if [[ " ${parts[*]} " == *" memory "* ]]; then
  read -r -a step_args <<<"${MEMORY_ARGS:-}"
  for side in lora qlora qlora-embeddings; do
    quantize=()
    [[ $side == qlora ]] && quantize=(--quantize-base nf4)
    [[ $side == qlora-embeddings ]] && quantize=(--quantize-base nf4 --quantize-embeddings)
    "$hpctrain" estimate-memory --model-config "$config" "${lora[@]}" "${quantize[@]}" --batch-size "$batch" \
      --sequence-length "$length" --threads 1 "${step_args[@]}" --measure --json >"$work/memory-$side.json"
    "$python" - "$work/memory-$side.json" "$side" "${MEMORY_ARGS:-}" >>"$results" <<'PY'
import json, sys
e = json.load(open(sys.argv[1]))
print(json.dumps({"part": "memory", "side": sys.argv[2], "step_args": sys.argv[3], "parameters": e["parameter_count"],
                  "model_bytes": e["measured"]["model_bytes"], "step_peak": e["measured"]["peak_bytes"],
                  "estimate": e["bytes"]["total"]}))
PY
  done
fi

if [[ " ${parts[*]} " == *" kernel "* ]]; then
  "$python" - "$config" >"$work/shape" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
heads, kv = c["num_attention_heads"], c.get("num_key_value_heads", c["num_attention_heads"])
print(c["hidden_size"], c["intermediate_size"], c["hidden_size"] // heads * kv, c["num_hidden_layers"])
PY
  read -r hidden intermediate kv layers <"$work/shape"
  "$build/bench/bench_fused_product" --hidden "$hidden" --intermediate "$intermediate" --kv "$kv" --layers "$layers" \
    --tokens $((batch * length)) --threads 1 --rounds "$rounds"
fi

if [[ " ${parts[*]} " == *" speed "* ]]; then
  "$python" -c 'import transformers, peft, bitsandbytes, h5py' ||
    { echo "error: $python cannot import transformers, peft, bitsandbytes and h5py (set PYTHON)" >&2; exit 1; }
  "$python" bench/lm/make_data.py "$work/lm.h5" --rows $(( (warmup + steps) * batch )) --length "$length" --vocab 32000
  "$python" - "$config" "$work/base" <<'PY'
import sys, torch
sys.path.insert(0, "bench/lm")
from torch_lm import load_config
from transformers import AutoModelForCausalLM
torch.manual_seed(0)
AutoModelForCausalLM.from_config(load_config(sys.argv[1])).to(torch.bfloat16).save_pretrained(sys.argv[2])
PY
  hpctrain_side() {
    rm -rf "$work/run"
    "$hpctrain" train --model "$work/base" --data "$work/lm.h5" --output "$work/run" "${lora[@]}" --lora-alpha 32 \
      --quantize-base nf4 --max-steps $((warmup + steps)) --batch-size "$batch" --lr 1e-4 --weight-decay 0 \
      --max-grad-norm 1 --threads 1 --logging-steps 1 --no-progress --report-to none --peak-tflops 1 \
      >"$work/hpctrain.log" 2>&1 || { tail -20 "$work/hpctrain.log"; exit 1; }
    "$python" - "$work/run/metrics.jsonl" "$warmup" <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if '"loss"' in l]
print(json.dumps({"side": "hpctrain", "step_seconds": [e["time"]["step"] for e in lines[int(sys.argv[2]):]],
                  "model_bytes": lines[-1]["model_bytes"]}))
PY
  }
  peer_side() { "$python" bench/qlora/peer.py "$work/base" "$work/lm.h5" --batch "$batch" --steps "$steps" \
                  --warmup "$warmup" --rank 16 --threads 1 2>"$work/peer.log" | tail -1; }
  for round in $(seq 1 "$rounds"); do
    order=(hpctrain_side peer_side)
    (( round % 2 == 0 )) && order=(peer_side hpctrain_side)
    for side in "${order[@]}"; do
      "$side" | "$python" -c "import json, sys; e = json.loads(sys.stdin.read()); e.update(part='speed', round=$round); print(json.dumps(e))" >>"$results"
    done
  done
fi
[[ ! -s "$results" ]] || "$python" bench/qlora/summary.py "$results"  # the kernel part prints its own summary
