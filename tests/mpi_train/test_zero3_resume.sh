# --zero-stage 3's checkpoints (docs/zero.md, "Checkpoints and start-up"): stage 0's layout; a 2-rank stage-3
# checkpoint resumed at stage 0 on 1 rank, and a 1-rank stage-0 one at stage 3 on 2 ranks, each ending where the
# uninterrupted 2-rank stage-0 run does (1e-6 relative per tensor). LoRA on that run's model: the frozen base
# sharded too, the adapters trained as at stage 0.
source "$(dirname "$0")/lib.sh"
make_fixture 0.0
source "$HERE/zero3_lib.sh"

# ---- checkpoints: stage 0's layout; 2 ranks stage 3 -> 1 rank stage 0, 1 rank stage 0 -> 2 ranks stage 3 ----
SAVE_STEPS=8 zero_run bert2-0 2 0
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
# 1 rank sums the batch in another order than 2: the key biases' zero gradients are rounding noise (as at 4 ranks).
same "2 ranks stage 3 -> 1 rank stage 0 == uninterrupted" bert2-0 ck3 --skip k_lin.bias
STEPS=4 SAVE_STEPS=4 zero_run ck1 1 0
run_ok "1-rank stage-0 checkpoint resumed on 2 ranks, stage 3" "$WORK/ck1r.log" mpi 2 train $(train_args "$WORK/ck1") \
  "${adamw[@]}" --max-steps 8 --save-steps 100 --batch-size 2 --zero-stage 3 --resume "$WORK/ck1/checkpoint-4"
same "1 rank stage 0 -> 2 ranks stage 3 == uninterrupted" bert2-0 ck1 --skip k_lin.bias

# ---- LoRA on bert2-0's model: the frozen base sharded too, the adapters trained ----
lora=(--model "$WORK/bert2-0/final" --data "$WORK/data.h5" --tokenizer "$WORK/tok" --threads 1 --device cpu --no-progress
      --logging-steps 1 --lr 5e-3 --lora-r 4 --lora-alpha 8 --eval-steps 100 --batch-size 4 --max-steps 4 --save-steps 100
      --peak-tflops 1 --report-to none)
for s in 0 3; do run_ok "LoRA stage $s" "$WORK/lora$s.log" mpi 2 train "${lora[@]}" --output "$WORK/lora$s" --zero-stage $s; done
compare "$WORK/lora0/final/adapter_model.safetensors" "$WORK/lora3/final/adapter_model.safetensors" 1e-6 \
  && ok "LoRA: stage 3 adapters == stage 0's" || bad "LoRA adapters differ"
finish
