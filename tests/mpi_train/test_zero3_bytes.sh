# --zero-stage 3's bytes on the wire and state per rank (docs/zero.md, "Bytes on the wire (stage 3)", "Memory"):
# comm_bytes per step exactly the documented formula at 2 ranks (1.5x stage 0's with resharding after forward,
# 1x without, plus padding, the norm and the flags; GPT-2's tied embeddings gathered once per micro-batch),
# model_state_bytes at 4 ranks <= 0.30x stage 0's, and stage 3 == stage 0 on 4 ranks (--oversubscribe) after 8
# AdamW steps with clipping and accumulation on DistilBERT, GPT-2 (also with gradient checkpointing) and Llama (also
# with LoRA).
source "$(dirname "$0")/lib.sh"
make_fixture 0.0
make_lm_fixture
source "$HERE/zero3_lib.sh"

# ---- 4 ranks: the state per rank, and stage 3 == stage 0 ----
for s in 0 3; do
  zero_run "bert4-$s" 4 $s
  lm_run "gpt2-4-$s" 4 $s gpt2.json
  lm_run "llama4-$s" 4 $s llama.json
done
# On 4 ranks the reduce-scatter sums the ranks' gradients in another order than the allreduce: the key biases,
# whose exact gradient is 0, are rounding noise that AdamW's normalization turns into steps (compare_weights.py).
same "DistilBERT, 4 ranks: stage 3 == stage 0" bert4-0 bert4-3 --skip k_lin.bias
same "GPT-2 (tied head), 4 ranks: stage 3 == stage 0" gpt2-4-0 gpt2-4-3 --skip "c_attn.bias[32:64]"  # n_embd 32
same "Llama (GQA, untied head), 4 ranks: stage 3 == stage 0" llama4-0 llama4-3
lm_run gpt2-4-ck 4 3 gpt2.json --gradient-checkpointing
same "GPT-2, gradient checkpointing, 4 ranks: stage 3 == stage 0" gpt2-4-0 gpt2-4-ck --skip "c_attn.bias[32:64]"
# LoRA adapts the Llama stage 0 trained above. At lr 5e-3 the adapters differed by 1.04e-6 of their largest value
# (0.2): on 4 ranks the reduce-scatter adds the ranks' gradients in another order than the allreduce, and AdamW
# turns the rounding of near-zero gradient elements into steps of up to lr; at lr 1e-3 that is 5x smaller.
for s in 0 3; do
  run_ok "llama4-lora-$s" "$WORK/llama4-lora-$s.log" mpi 4 train --model "$WORK/llama4-0/final" --data "$WORK/packed.h5" \
    --tokenizer "$BPE" --output "$WORK/llama4-lora-$s" --threads 1 --no-progress --logging-steps 1 --lr 1e-3 \
    "${adamw[@]}" --max-steps 8 --save-steps 100 --batch-size 1 --zero-stage $s --lora-r 4 --lora-alpha 8
done
compare "$WORK/llama4-lora-0/final/adapter_model.safetensors" "$WORK/llama4-lora-3/final/adapter_model.safetensors" \
  1e-6 && ok "Llama LoRA, 4 ranks: stage 3's adapter == stage 0's" || bad "Llama LoRA, 4 ranks: adapters differ"

# ---- bytes on the wire at 2 ranks, one micro-batch per step ----
one=(--lr-scheduler constant --max-steps 2 --save-steps 100 --eval-steps 100 --batch-size 4 --max-grad-norm 0.5
     --peak-tflops 1 --report-to none)
for run in "b0 0 true" "b3 3 true" "b3k 3 false"; do
  read -r name s reshard <<<"$run"
  run_ok "$name" "$WORK/$name.log" mpi 2 train $(train_args "$WORK/$name") "${one[@]}" --zero-stage $s \
    --zero-reshard-after-forward $reshard
done
"$PY" "$HERE/zero3_bytes.py" untied "$WORK/b0/$W" "$WORK"/b{0,3,3k}/metrics.jsonl "$WORK"/bert4-{0,3}/metrics.jsonl \
  && ok "comm_bytes as the formula (1.5x stage 0 resharding, 1x not); model_state_bytes at 4 ranks <= 0.30x" \
  || bad "comm_bytes or model_state_bytes"

# ---- a tied head (GPT-2): its embeddings' unit gathered once per micro-batch (Note [Unit gathers]) ----
for run in "g0 0 true" "g3 3 true" "g3k 3 false"; do
  read -r name s reshard <<<"$run"
  run_ok "$name" "$WORK/$name.log" mpi 2 train $(lm_args gpt2.json "$name") "${one[@]}" --zero-stage $s \
    --zero-reshard-after-forward $reshard
done
"$PY" "$HERE/zero3_bytes.py" tied "$WORK/g0/$W" "$WORK"/g{0,3,3k}/metrics.jsonl "$WORK/g3.log" \
  && ok "GPT-2's tied embeddings gathered once per micro-batch: comm_bytes as the formula, <= 1.55x / 1.05x stage 0" \
  || bad "GPT-2 (tied head) comm_bytes"
finish
