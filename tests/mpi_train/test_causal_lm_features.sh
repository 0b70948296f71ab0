# The training features classification has, on causal LMs (issue 21 item 4): bf16 autocast tracks fp32 loosely
# (GPT-2 and Llama); gradient checkpointing gives the weights of the plain run (dropout off); every optimizer trains
# 3 steps to a finite loss; SIGTERM mid-run (HPCTRAIN_TEST_SIGNAL_AT) saves a checkpoint, exits 75, and
# --resume auto ends equal to the uninterrupted run; TensorBoard events hold metrics.jsonl's values, tokens/s
# and perplexity included; --timeline writes a trace with every phase of every step on both ranks.
source "$(dirname "$0")/lib.sh"
make_lm_fixture
lm_args() {  # lm_args CONFIG OUTPUT
  echo --data "$WORK/packed.h5" --model-config "$WORK/$1" --tokenizer "$BPE" --output "$WORK/$2" --threads 1 \
    --no-progress --logging-steps 1 --shuffle global --batch-size 4
}
# Of the 6-step runs: a constant LR, so that a resumed run takes the same steps; no checkpoint before the end.
steady=(--lr 5e-3 --lr-scheduler constant --eval-steps 100 --save-steps 100 --max-steps 6)
W=final/model.safetensors
# losses RUN...: prints each run's loss curve; fails unless every loss is finite.
losses() {
  "$PY" - "$@" <<'PYEOF'
import json, math, sys
for path in sys.argv[1:]:
    curve = [e["loss"] for e in map(json.loads, open(path + "/metrics.jsonl")) if "loss" in e]
    print(path.rsplit("/", 1)[-1], curve)
    if not curve or not all(math.isfinite(x) for x in curve): sys.exit(1)
PYEOF
}

# --- References (2 ranks, 6 steps), bf16 and gradient checkpointing, GPT-2 and Llama ------------------------
for model in gpt2 llama; do
  run_ok "$model: fp32 reference" "$WORK/$model.log" mpi 2 train $(lm_args $model.json $model) "${steady[@]}"
  run_ok "$model: --mixed-precision bf16" "$WORK/$model-bf16.log" mpi 2 train $(lm_args $model.json $model-bf16) \
    "${steady[@]}" --mixed-precision bf16
  run_ok "$model: --gradient-checkpointing" "$WORK/$model-ckpt.log" mpi 2 train $(lm_args $model.json $model-ckpt) \
    "${steady[@]}" --gradient-checkpointing
  compare "$WORK/$model/$W" "$WORK/$model-ckpt/$W" 1e-6 && ok "$model: checkpointing's weights == the plain run's (1e-6)" \
    || bad "$model: checkpointing changes the weights"
  # bf16 rounds the matrix products (about 3 significant digits): the curves agree to a few per cent, fall, and
  # are not identical (else autocast was not on).
  "$PY" - "$WORK/$model/metrics.jsonl" "$WORK/$model-bf16/metrics.jsonl" <<'PYEOF' \
    && ok "$model: the bf16 loss tracks fp32's (within 2 %) and falls" || bad "$model: bf16 loss curve"
import json, math, sys
a, b = ([e["loss"] for e in map(json.loads, open(p)) if "loss" in e] for p in sys.argv[1:])
print("fp32", a); print("bf16", b)
sys.exit(0 if len(a) == len(b) == 6 and all(math.isfinite(y) and abs(x - y) <= 0.02 * x for x, y in zip(a, b))
         and b[-1] < b[0] - 0.1 and a != b else 1)
PYEOF
done
grep -q -- "--mixed-precision bf16: the CPU" "$WORK/gpt2-bf16.log" && ok "the bf16 run says bf16" \
  || { bad "bf16 not in the log"; head -20 "$WORK/gpt2-bf16.log"; }

# --- Every optimizer: 3 steps on 1 rank, a finite loss that falls ------------------------------------------
for optim in adamw_torch adafactor sgd adamw_bnb_8bit; do
  lr=5e-3; [[ $optim == sgd ]] && lr=0.5
  run_ok "--optim $optim: 3 steps" "$WORK/optim-$optim.log" mpi 1 train $(lm_args gpt2.json optim-$optim) --max-steps 3 \
    --optim $optim --lr $lr --save-steps 100
  losses "$WORK/optim-$optim" >"$WORK/optim-$optim.losses" && ok "--optim $optim: finite losses $(tail -1 "$WORK/optim-$optim.losses")" \
    || { bad "--optim $optim: loss"; cat "$WORK/optim-$optim.losses"; }
  grep -q "^optimizer: $optim " "$WORK/optim-$optim.log" && ok "--optim $optim: named in the log" \
    || { bad "--optim $optim not in the log"; head -20 "$WORK/optim-$optim.log"; }
done

# --- SIGTERM on rank 1 at step 3: checkpoint-3, exit 75; --resume auto ends as the uninterrupted run ----------
HPCTRAIN_TEST_SIGNAL_AT=1:3:1 mpi 2 train $(lm_args gpt2.json term) "${steady[@]}" >"$WORK/term.log" 2>&1
rc=$?
[[ $rc -eq 75 ]] && ok "SIGTERM: exit code 75" || { bad "SIGTERM: exit code $rc (expected 75)"; tail -20 "$WORK/term.log"; }
grep -q "stopped early by SIGTERM on rank 1 after step 3" "$WORK/term.log" && [[ -d "$WORK/term/checkpoint-3" ]] \
  && [[ ! -e "$WORK/term/final" ]] && ok "SIGTERM: checkpoint-3 saved, no final model" \
  || { bad "SIGTERM: checkpoint"; grep -i "stop\|checkpoint" "$WORK/term.log"; ls "$WORK/term"; }
(cd "$WORK/term/checkpoint-3" && sha256sum -c --quiet checksums.sha256) && ok "SIGTERM: checkpoint-3 verifies" \
  || bad "SIGTERM: checkpoint-3 does not verify"
run_ok "SIGTERM: --resume auto" "$WORK/term-resume.log" mpi 2 train $(lm_args gpt2.json term) "${steady[@]}" --resume auto
grep -q "resuming at step 3 " "$WORK/term-resume.log" && ok "SIGTERM: resumed at step 3" || bad "SIGTERM: resume point"
compare "$WORK/gpt2/$W" "$WORK/term/$W" 0 && ok "SIGTERM: resumed weights == uninterrupted weights (bitwise)" \
  || bad "SIGTERM: resumed weights differ"
"$PY" - "$WORK/gpt2/metrics.jsonl" "$WORK/term/metrics.jsonl" <<'PYEOF' && ok "SIGTERM: metrics.jsonl reads as one run" || bad "SIGTERM: metrics.jsonl"
import json, sys
def steps(path):
    return [(e["step"], e["loss"]) for e in map(json.loads, open(path)) if "loss" in e]
a, b = steps(sys.argv[1]), steps(sys.argv[2])
print(a); print(b)
sys.exit(0 if a == b and [s for s, _ in a] == list(range(1, 7)) else 1)
PYEOF

# --- TensorBoard: the events hold metrics.jsonl's values (tokens/s, MFU, perplexity), also across the resume --
for run in gpt2 term; do
  "$PY" "$HERE/read_tfevents.py" "$WORK/$run" >"$WORK/events-$run.log" 2>&1 && ok "$run: the events equal metrics.jsonl" \
    || { bad "$run: events vs metrics.jsonl"; cat "$WORK/events-$run.log"; }
done
"$PY" - "$HERE" "$WORK/gpt2" <<'PYEOF' && ok "train/tokens_per_second (> 0) at every step, eval/perplexity at the end" || bad "tokens/s events"
import sys
sys.path.insert(0, sys.argv[1])
import read_tfevents
problems = []
_, scalars = read_tfevents.read_run(sys.argv[2], problems)
tokens = {step: v for (tag, step), v in scalars.items() if tag == "train/tokens_per_second"}
print(sorted(tokens.items()), problems)
sys.exit(0 if sorted(tokens) == list(range(1, 7)) and min(tokens.values()) > 0 and ("eval/perplexity", 6) in scalars
         and not problems else 1)
PYEOF

# --- --timeline: Llama on 2 ranks, 2 micro-batches a step, checkpoints and evaluations at steps 2 and 4 ---------
run_ok "--timeline" "$WORK/timeline.log" mpi 2 train $(lm_args llama.json timeline) --max-steps 4 \
  --gradient-accumulation-steps 2 --save-steps 2 --eval-steps 2 --bucket-mb 0.01 --first-bucket-mb 0.004 \
  --timeline "$WORK/trace.json"
"$PY" "$HERE/check_timeline.py" "$WORK/trace.json" "$WORK/timeline/metrics.jsonl" 4 2 >"$WORK/trace.log" 2>&1 \
  && ok "the trace has every phase of every step on both ranks" || { bad "trace contents"; cat "$WORK/trace.log"; }
finish
