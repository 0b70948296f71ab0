# --zero-stage 3 under mpirun (Note [Sharded parameters] in src/ddp/sharded_parameters.cpp, Note [Unit gathers] in
# src/train/parallel/fully_sharded.cpp): the weights stage 0 reaches after 8 AdamW steps with clipping and
# accumulation, on 2 and 4 ranks, for DistilBERT, GPT-2 (tied head) and Llama (grouped-query attention, untied
# head), with LoRA and with gradient checkpointing; comm_bytes exactly as docs/zero.md's formula (1.5x stage 0's
# with resharding after forward, 1x without, at 2 ranks) and model_state_bytes at 4 ranks <= 0.30x stage 0's;
# checkpoints in stage 0's layout resuming 3 -> 0 and 0 -> 3 across world sizes; the refusals naming both options;
# a rank stopped before a gather named with the unit by the collective timeout.
source "$(dirname "$0")/lib.sh"
make_fixture 0.0
make_lm_fixture
W=final/model.safetensors
# The global batch (8 rows, --shuffle global: the same rows at any rank count) as 2 ranks x 2 x accumulation 2,
# 4 ranks x 1 x 2 or 1 rank x 4 x 2; clipping at a small norm, so that it clips.
adamw=(--lr-scheduler constant --shuffle global --eval-steps 100 --gradient-accumulation-steps 2
       --max-grad-norm 0.5 --weight-decay 0.01 --peak-tflops 1 --report-to none)
declare -A per_rank=([1]=4 [2]=2 [4]=1)
lm_args() {  # lm_args CONFIG OUTPUT
  echo --data "$WORK/packed.h5" --model-config "$WORK/$1" --tokenizer "$BPE" --output "$WORK/$2" --threads 1 \
    --no-progress --logging-steps 1 --lr 5e-3
}
# zero_run NAME NP STAGE [ARGS...] (DistilBERT), lm_run NAME NP STAGE CONFIG [ARGS...]: STEPS (8) steps of the
# global batch
zero_run() {
  local name=$1 np=$2 stage=$3; shift 3
  run_ok "$name" "$WORK/$name.log" mpi "$np" train $(train_args "$WORK/$name") "${adamw[@]}" \
    --max-steps "${STEPS:-8}" --save-steps "${SAVE_STEPS:-100}" --batch-size "${per_rank[$np]}" --zero-stage "$stage" "$@"
}
lm_run() {
  local name=$1 np=$2 stage=$3 config=$4; shift 4
  run_ok "$name" "$WORK/$name.log" mpi "$np" train $(lm_args "$config" "$name") "${adamw[@]}" \
    --max-steps 8 --save-steps 100 --batch-size "${per_rank[$np]}" --zero-stage "$stage" "$@"
}
same() {  # same LABEL A B [--skip PART]: 1e-6 relative (compare_weights.py)
  local label=$1 a=$2 b=$3; shift 3
  compare "$WORK/$a/$W" "$WORK/$b/$W" 1e-6 "$@" && ok "$label" || bad "$label"
}

# ---- stage 3 == stage 0 (1e-6) after 8 AdamW steps, on 2 ranks and on 4 ----
for np in 2 4; do
  for s in 0 3; do
    zero_run "bert$np-$s" $np $s
    lm_run "gpt$np-$s" $np $s gpt2.json
    lm_run "llama$np-$s" $np $s llama.json
  done
done
same "DistilBERT, 2 ranks: stage 3 == stage 0" bert2-0 bert2-3
same "GPT-2 (tied head), 2 ranks: stage 3 == stage 0" gpt2-0 gpt2-3
same "Llama (GQA, untied head), 2 ranks: stage 3 == stage 0" llama2-0 llama2-3
# On 4 ranks the reduce-scatter sums the ranks' gradients in another order than the allreduce: the key biases,
# whose exact gradient is 0, are rounding noise that AdamW's normalization turns into steps (compare_weights.py);
# GPT-2's sit in c_attn.bias.
same "DistilBERT, 4 ranks: stage 3 == stage 0" bert4-0 bert4-3 --skip k_lin.bias
same "GPT-2 (tied head), 4 ranks: stage 3 == stage 0" gpt4-0 gpt4-3 --skip c_attn.bias
same "Llama (GQA, untied head), 4 ranks: stage 3 == stage 0" llama4-0 llama4-3
grep -q "ZeRO stage 3: 4 units; this rank keeps" "$WORK/bert2-3.log" && ok "stage 3 says what it shards" \
  || { bad "no stage-3 line"; grep "ZeRO" "$WORK/bert2-3.log"; }

# ---- gradient checkpointing (the gather outside the recomputation); without resharding after forward ----
lm_run gpt2-ck 2 3 gpt2.json --gradient-checkpointing
same "GPT-2, gradient checkpointing: stage 3 == stage 0" gpt2-0 gpt2-ck
zero_run bert2-keep 2 3 --zero-reshard-after-forward false
same "DistilBERT, --zero-reshard-after-forward false: stage 3 == stage 0" bert2-0 bert2-keep

# ---- LoRA on bert2-0's model: the frozen base sharded too, the adapters trained ----
lora=(--model "$WORK/bert2-0/final" --data "$WORK/data.h5" --tokenizer "$WORK/tok" --threads 1 --device cpu --no-progress
      --logging-steps 1 --lr 5e-3 --lora-r 4 --lora-alpha 8 --eval-steps 100 --batch-size 4 --max-steps 4 --save-steps 100
      --peak-tflops 1 --report-to none)
for s in 0 3; do run_ok "LoRA stage $s" "$WORK/lora$s.log" mpi 2 train "${lora[@]}" --output "$WORK/lora$s" --zero-stage $s; done
compare "$WORK/lora0/final/adapter_model.safetensors" "$WORK/lora3/final/adapter_model.safetensors" 1e-6 \
  && ok "LoRA: stage 3 adapters == stage 0's" || bad "LoRA adapters differ"

# ---- bytes on the wire (docs/zero.md, "Bytes on the wire": stage 3) and the state per rank ----
one=(--lr-scheduler constant --max-steps 2 --save-steps 100 --eval-steps 100 --batch-size 4 --max-grad-norm 0.5
     --peak-tflops 1 --report-to none)
for run in "b0 0 true" "b3 3 true" "b3k 3 false"; do
  read -r name s reshard <<<"$run"
  run_ok "$name" "$WORK/$name.log" mpi 2 train $(train_args "$WORK/$name") "${one[@]}" --zero-stage $s \
    --zero-reshard-after-forward $reshard
done
"$PY" - "$HERE/compare_weights.py" "$WORK/b0/$W" "$WORK"/b{0,3,3k}/metrics.jsonl "$WORK"/bert4-{0,3}/metrics.jsonl <<'PYEOF' \
  && ok "comm_bytes as the formula (1.5x stage 0 resharding, 1x not); model_state_bytes at 4 ranks <= 0.30x" \
  || bad "comm_bytes or model_state_bytes"
import importlib.util, json, re, sys
spec = importlib.util.spec_from_file_location("cw", sys.argv[1]); cw = importlib.util.module_from_spec(spec); spec.loader.exec_module(cw)
_, tensors = cw.read(sys.argv[2])
def lines(path):
    return [e for e in map(json.loads, open(path)) if "loss" in e]
def unit(name):  # Note [Unit gathers]: the DistilBERT fixture's units
    m = re.match(r"distilbert\.transformer\.layer\.(\d+)\.", name)
    return f"layer {m.group(1)}" if m else "embeddings" if name.startswith("distilbert.embeddings.") else "head"
numels = {}
for name, t in tensors.items():
    assert t.size < 4096, name  # alignment 1 (optim::any_segment_alignment): a unit pads to a multiple of 2 ranks
    numels[unit(name)] = numels.get(unit(name), 0) + t.size
padded = sum(-(-n // 2) * 2 for n in numels.values())
b0, b3, b3k = ([e["comm_bytes"] for e in lines(p)] for p in sys.argv[3:6])
other = b0[0] - 4 * sum(numels.values())  # stage 0: one bucket (no flags); the rest is the step's other collectives
buckets = len(numels)
def expected(gathers):  # reduce-scatter 4 N / 2 + gathers x 4 N / W + norm 8 + late-gradient flags 4 (B - 1) + other
    return 2 * padded + gathers * 2 * padded + 8 + 4 * (buckets - 1) + other
print(f"units {numels}, padded {padded}; stage 0 {b0}, stage 3 {b3} (expected {expected(2)}), "
      f"without resharding {b3k} (expected {expected(1)}); ratios {b3[0] / b0[0]:.4f}, {b3k[0] / b0[0]:.4f}")
ok = all(x == expected(2) for x in b3) and all(x == expected(1) for x in b3k)
ok = ok and max(b3) <= 1.55 * min(b0) and max(b3k) <= 1.05 * min(b0)
m0, m3 = ({e["model_state_bytes"] for e in lines(p)} for p in sys.argv[6:8])
print(f"model_state_bytes on 4 ranks: stage 0 {m0}, stage 3 {m3}")
ok = ok and len(m0) == 1 and len(m3) == 1 and max(m3) <= 0.30 * min(m0)
sys.exit(0 if ok else 1)
PYEOF

# ---- checkpoints: stage 0's layout; 2 ranks stage 3 -> 1 rank stage 0, 1 rank stage 0 -> 2 ranks stage 3 ----
STEPS=4 SAVE_STEPS=4 zero_run ck3 2 3
"$PY" - "$HERE/compare_weights.py" "$WORK/ck3/checkpoint-4" "$WORK/bert2-0/checkpoint-8" <<'PYEOF' \
  && ok "stage-3 checkpoint in stage 0's layout (names, shapes, dtypes)" || bad "stage-3 checkpoint layout"
import importlib.util, sys
spec = importlib.util.spec_from_file_location("cw", sys.argv[1]); cw = importlib.util.module_from_spec(spec); spec.loader.exec_module(cw)
for name in ("model.safetensors", "optimizer.safetensors"):
    (_, a), (_, b) = cw.read(f"{sys.argv[2]}/{name}"), cw.read(f"{sys.argv[3]}/{name}")
    layout = lambda t: {k: (v.shape, v.dtype) for k, v in t.items()}
    assert layout(a) == layout(b) and len(a) > 4, name
PYEOF
run_ok "stage-3 checkpoint resumed on 1 rank, stage 0" "$WORK/ck3r.log" mpi 1 train $(train_args "$WORK/ck3") \
  "${adamw[@]}" --max-steps 8 --save-steps 100 --batch-size 4 --zero-stage 0 --resume "$WORK/ck3/checkpoint-4"
grep -q "resuming at step 4" "$WORK/ck3r.log" && ok "resumed at step 4" || bad "resume point"
same "2 ranks stage 3 -> 1 rank stage 0 == uninterrupted" bert2-0 ck3 --skip k_lin.bias
STEPS=4 SAVE_STEPS=4 zero_run ck1 1 0
run_ok "1-rank stage-0 checkpoint resumed on 2 ranks, stage 3" "$WORK/ck1r.log" mpi 2 train $(train_args "$WORK/ck1") \
  "${adamw[@]}" --max-steps 8 --save-steps 100 --batch-size 2 --zero-stage 3 --resume "$WORK/ck1/checkpoint-4"
same "1 rank stage 0 -> 2 ranks stage 3 == uninterrupted" bert2-0 ck1 --skip k_lin.bias

# ---- refusals at start-up, naming both options; a vision model has no units ----
mpi 2 train $(train_args "$WORK/a") --max-steps 2 --optim adafactor --zero-stage 3 >"$WORK/a.log" 2>&1 \
  && bad "Adafactor with stage 3 accepted" || {
  grep -q -- "--optim adafactor with --zero-stage 3 is not supported" "$WORK/a.log" \
    && ok "Adafactor with --zero-stage 3 refused, naming both" || { bad "Adafactor message"; tail -5 "$WORK/a.log"; }; }
mpi 2 train $(train_args "$WORK/l") --max-steps 2 --local-sgd-steps 2 --zero-stage 3 >"$WORK/l.log" 2>&1 \
  && bad "Local SGD with stage 3 accepted" || {
  grep -q -- "--local-sgd-steps 2 with --zero-stage 3 is not supported" "$WORK/l.log" \
    && ok "Local SGD with --zero-stage 3 refused, naming both" || { bad "Local SGD message"; tail -5 "$WORK/l.log"; }; }
timeout 60 "$MPIEXEC" --oversubscribe --bind-to none -np 1 "$HPCTRAIN" train $(train_args "$WORK/m") --max-steps 2 \
  --zero-stage 3 : -np 1 "$HPCTRAIN" train $(train_args "$WORK/m") --max-steps 2 --zero-stage 2 >"$WORK/m.log" 2>&1 \
  && bad "mismatched --zero-stage accepted" || {
  grep -q -- "--zero-stage differs across ranks: rank 0 has 3, rank 1 has 2" "$WORK/m.log" \
    && ok "mismatched --zero-stage refused, naming the option" || { bad "mismatch message"; tail -5 "$WORK/m.log"; }; }

# ---- a rank that stops before a gather: the others' collective timeout names it and the unit ----
HPCTRAIN_TEST_STOP_IN_GATHER=1:3 timeout 120 "$MPIEXEC" --oversubscribe --bind-to none -np 2 "$HPCTRAIN" train \
  $(train_args "$WORK/stop") --max-steps 2 --zero-stage 3 --collective-timeout 3 >"$WORK/stop.log" 2>&1
code=$?
[[ $code -ne 0 && $code -ne 124 ]] && ok "a stopped rank ends the job (exit $code), no hang" || bad "stopped rank: exit $code"
grep -q "collective timeout: allgather #[0-9]* on duplicate communicator [0-9]* (parameter all-gather of unit 'transformer layer 1')" \
  "$WORK/stop.log" && grep -q "no answer from rank 1" "$WORK/stop.log" \
  && ok "the timeout names the missing rank and the unit" || { bad "timeout report"; grep -i "timeout" "$WORK/stop.log"; }
finish
