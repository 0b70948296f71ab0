# --zero-stage 3 under mpirun on 2 ranks (Note [Sharded parameters] in src/ddp/sharded_parameters.cpp, Note [Unit
# gathers] in src/train/parallel/fully_sharded.cpp): the weights stage 0 reaches after 8 AdamW steps with clipping
# and accumulation (1e-6 relative per tensor; bitwise in practice), for DistilBERT, GPT-2 (tied head) and Llama
# (grouped-query attention, untied head), with gradient checkpointing and without resharding after forward.
# The other stage-3 scripts: test_zero3_bytes.sh (4 ranks, the wire and the state per rank), test_zero3_resume.sh
# (checkpoints across stages and world sizes, LoRA), test_zero3_refusals.sh (refusals, a rank stopped in a gather).
source "$(dirname "$0")/lib.sh"
make_fixture 0.0
make_lm_fixture
source "$HERE/zero3_lib.sh"

for s in 0 3; do
  zero_run "bert2-$s" 2 $s
  lm_run "gpt2-$s" 2 $s gpt2.json
  lm_run "llama2-$s" 2 $s llama.json
done
same "DistilBERT, 2 ranks: stage 3 == stage 0" bert2-0 bert2-3
same "GPT-2 (tied head), 2 ranks: stage 3 == stage 0" gpt2-0 gpt2-3
same "Llama (GQA, untied head), 2 ranks: stage 3 == stage 0" llama2-0 llama2-3
grep -q "ZeRO stage 3: 4 units; this rank keeps" "$WORK/bert2-3.log" && ok "stage 3 says what it shards" \
  || { bad "no stage-3 line"; grep "ZeRO" "$WORK/bert2-3.log"; }

# ---- gradient checkpointing (the gather outside the recomputation); without resharding after forward ----
lm_run gpt2-ck 2 3 gpt2.json --gradient-checkpointing
same "GPT-2, gradient checkpointing: stage 3 == stage 0" gpt2-0 gpt2-ck
lm_run llama2-keep 2 3 llama.json --zero-reshard-after-forward false
same "Llama, --zero-reshard-after-forward false: stage 3 == stage 0" llama2-0 llama2-keep
finish
