# --grad-reduce-dtype bf16 under mpirun -np 2 (Note [bf16 gradient reduction]): the gradient bytes on the
# wire halve (comm_bytes in metrics.jsonl), the replicas stay bitwise equal (--check-sync-every 1), the
# weights differ from the fp32-reduced run but stay within bf16 rounding of it; it works with overlap,
# accumulation and --mixed-precision bf16, an injected overflow still skips the step on both ranks, and
# --local-sgd-steps with it, or a bad value, stops every rank at start-up naming the option.
source "$(dirname "$0")/lib.sh"
make_fixture 0.0
LR=0.05
STEPS=4
common=(--optim sgd --lr-scheduler constant --max-steps $STEPS --save-steps 100 --eval-steps 100
        --bucket-mb 0.02 --first-bucket-mb 0.004 --check-sync-every 1)

run_ok "fp32 reduce" "$WORK/f.log" mpi 2 train $(train_args "$WORK/f") "${common[@]}" --batch-size 4
run_ok "bf16 reduce" "$WORK/b.log" mpi 2 train $(train_args "$WORK/b") "${common[@]}" --batch-size 4 --grad-reduce-dtype bf16
# One run for the combinations: accumulation, overlap off, bf16 autocast, loss scaling with an overflow.
run_ok "bf16 reduce, 2 x 2 accumulated, overlap off, bf16 autocast, overflow on rank 1 at step 2" "$WORK/o.log" \
  mpi 2 train $(train_args "$WORK/o") "${common[@]}" --batch-size 2 --gradient-accumulation-steps 2 --overlap off \
  --mixed-precision bf16 --grad-reduce-dtype bf16 --loss-scale dynamic --inject-overflow 1:2

# Bytes: every step sends the gradients (G) and a few fixed collectives (F): fp32 G + F, bf16 G/2 + F.
"$PY" - "$WORK/f/metrics.jsonl" "$WORK/b/metrics.jsonl" <<'PYEOF' && ok "comm_bytes with bf16 is half of fp32's (+ fixed collectives)" || bad "comm_bytes"
import json, sys
def bytes_(path):
    return sum(e["comm_bytes"] for e in map(json.loads, open(path)) if "comm_bytes" in e and "loss" in e)
f, b = bytes_(sys.argv[1]), bytes_(sys.argv[2])
print(f"fp32 {f} bytes, bf16 {b} bytes, bf16 - fp32/2 = {b - f / 2}")
sys.exit(0 if f > 0 and 0 <= b - f / 2 <= 0.02 * f else 1)
PYEOF

# Within bf16 rounding: each step's averaged gradient moves by at most 2u = 2^-7 of the local gradients'
# magnitude (u = 2^-8: bf16's 8 significant bits, rounded twice: the pack and the sum; tests/mpi_ddp's
# bf16_wire checks that bound element by element). Plain SGD turns that into at most 2u of each step's
# update, so after STEPS steps the weights differ by at most STEPS x 2u x (the largest update) relative to
# the largest weight; the updates here are below the largest weight (LayerNorm's 1.0), hence STEPS x 2^-7.
W=final/model.safetensors
tolerance=$("$PY" -c "print($STEPS * 2 ** -7)")
compare "$WORK/f/$W" "$WORK/b/$W" "$tolerance" && ok "bf16 within $tolerance of fp32 (relative, max norm)" \
  || bad "bf16-reduced weights too far from fp32"
compare "$WORK/f/$W" "$WORK/b/$W" 0 && bad "bf16-reduced weights equal fp32's bit for bit (the option did nothing)" \
  || ok "bf16-reduced weights are not fp32's"

"$PY" - "$WORK/o/metrics.jsonl" <<'PYEOF' && ok "the overflow survives the bf16 sum: step 2 skipped" || bad "overflow not seen"
import json, sys
lines = {e["step"]: e for e in map(json.loads, open(sys.argv[1])) if "loss_scale" in e}
print({s: (e["loss_scale"], e.get("skipped", False)) for s, e in sorted(lines.items())})
sys.exit(0 if lines[2].get("skipped") is True and not any(lines[s].get("skipped") for s in (1, 3, 4)) else 1)
PYEOF

# Start-up refusals, on every rank, naming the options.
mpi 2 train $(train_args "$WORK/l") "${common[@]}" --grad-reduce-dtype bf16 --local-sgd-steps 2 >"$WORK/l.log" 2>&1 \
  && bad "--local-sgd-steps with bf16 accepted" || {
  grep -q -- "--grad-reduce-dtype bf16 with --local-sgd-steps 2 is not supported" "$WORK/l.log" \
    && ok "--local-sgd-steps with bf16 refused, naming both" || { bad "local SGD refusal message"; tail -5 "$WORK/l.log"; }; }
mpi 2 train $(train_args "$WORK/x") "${common[@]}" --grad-reduce-dtype fp8 >"$WORK/x.log" 2>&1 \
  && bad "--grad-reduce-dtype fp8 accepted" || {
  grep -q -- "--grad-reduce-dtype 'fp8': expected fp32 or bf16" "$WORK/x.log" && ok "bad value named" \
    || { bad "bad value message"; tail -5 "$WORK/x.log"; }; }
finish
