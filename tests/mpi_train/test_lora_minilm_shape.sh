# Issue 24's acceptance figure on the shapes of MiniLM-L6 (the pretrained model bench/lora trains: BERT, hidden
# 384, 6 layers, 12 heads, FFN 1536, vocabulary 30,522; random weights here, as the ratio depends only on the shapes):
# with LoRA r 8 on query and value (PEFT's modules to save for SEQ_CLS: the classifier), comm_bytes and
# optimizer_state_bytes (metrics.jsonl, Note [Optimizer state bytes]) stay under 5 % of full fine-tuning's, on 2 ranks.
source "$(dirname "$0")/lib.sh"
make_fixture 0.0
cat >"$WORK/minilm.json" <<JSON
{"model_type": "bert", "architectures": ["BertForSequenceClassification"], "vocab_size": 30522, "hidden_size": 384,
 "num_hidden_layers": 6, "num_attention_heads": 12, "intermediate_size": 1536, "hidden_act": "gelu",
 "max_position_embeddings": 512, "type_vocab_size": 2, "layer_norm_eps": 1e-12, "hidden_dropout_prob": 0.0,
 "attention_probs_dropout_prob": 0.0}
JSON
args() {
  echo --data "$WORK/data.h5" --tokenizer "$WORK/tok" --output "$1" --threads 1 --device cpu --no-progress \
    --logging-steps 1 --lr 1e-3 --max-steps 2 --batch-size 4 --eval-steps 100 --save-steps 100
}
# Full fine-tuning from the configuration; its final/ is LoRA's base.
run_ok "full fine-tuning, MiniLM-L6 shapes, 2 ranks" "$WORK/full.log" mpi 2 train --model-config "$WORK/minilm.json" \
  $(args "$WORK/full")
run_ok "LoRA r 8 on query,value, 2 ranks" "$WORK/lora.log" mpi 2 train --model "$WORK/full/final" $(args "$WORK/lora") \
  --lora-r 8 --lora-alpha 16 --lora-target-modules query,value
"$PY" - "$WORK/full" "$WORK/lora" <<'PYEOF' && ok "LoRA: comm_bytes and optimizer_state_bytes < 5 % of full fine-tuning's" \
  || bad "LoRA's comm_bytes or optimizer_state_bytes not under 5 %"
import json, sys
def figures(run):
    lines = [e for e in map(json.loads, open(f"{run}/metrics.jsonl")) if "comm_bytes" in e and "loss" in e]
    return sum(e["comm_bytes"] for e in lines), max(e["optimizer_state_bytes"] for e in lines)
(full_comm, full_state), (lora_comm, lora_state) = figures(sys.argv[1]), figures(sys.argv[2])
print(f"comm_bytes: LoRA {lora_comm} / full {full_comm} = {lora_comm / full_comm:.4f}; "
      f"optimizer_state_bytes: LoRA {lora_state} / full {full_state} = {lora_state / full_state:.4f}")
sys.exit(0 if full_comm > 0 and full_state > 0 and lora_comm < 0.05 * full_comm and lora_state < 0.05 * full_state else 1)
PYEOF
finish
