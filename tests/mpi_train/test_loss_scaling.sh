# Loss scaling under mpirun -np 2 (--loss-scale dynamic: the scaler on fp32 compute, since fp16 kernels need
# CUDA): an overflow injected on rank 1 only skips that step on both ranks (the replicas stay equal), halves
# the scale, metrics.jsonl records the skip; a resumed run restores the scale from the checkpoint.
# Also: --mixed-precision fp16 on a CPU fails at start-up on every rank, naming the option.
source "$(dirname "$0")/lib.sh"
make_fixture 0.1

scaled=(--loss-scale dynamic --lr-scheduler constant --batch-size 4 --save-steps 4 --check-sync-every 1)
run_ok "overflow on rank 1 at step 3" "$WORK/a.log" \
  mpi 2 train $(train_args "$WORK/run") "${scaled[@]}" --max-steps 4 --inject-overflow 1:3
"$PY" - "$WORK/run/metrics.jsonl" <<'PYEOF' && ok "step 3 skipped, scale 65536 -> 32768" || bad "skip / scale in metrics.jsonl"
import json, sys
lines = {e["step"]: e for e in map(json.loads, open(sys.argv[1])) if "loss_scale" in e}
print({s: (e["loss_scale"], e.get("skipped", False), e["grad_norm"]) for s, e in sorted(lines.items())})
ok = sorted(lines) == [1, 2, 3, 4] and [lines[s]["loss_scale"] for s in (1, 2, 3, 4)] == [65536, 65536, 32768, 32768]
ok = ok and lines[3].get("skipped") is True and not any(lines[s].get("skipped") for s in (1, 2, 4))
sys.exit(0 if ok else 1)
PYEOF
grep -q "step 3: the gradients hold inf/NaN" "$WORK/a.log" && ok "the skip is reported" || bad "no skip message"
# --check-sync-every 1 compared the replicas after every step: a step taken on one rank only would have failed it.
"$PY" -c "import json,sys; s=json.load(open(sys.argv[1])); sys.exit(0 if json.load(open(sys.argv[2]))['scale'] == 32768 else 1)" \
  "$WORK/run/checkpoint-4/trainer_state.json" "$WORK/run/checkpoint-4/scaler.json" \
  && ok "checkpoint-4/scaler.json holds scale 32768" || bad "scaler.json in the checkpoint"

# Resume: the scale continues from the checkpoint (32768), not from 2^16. --save-dtype bf16: final/ in bf16.
run_ok "resume to step 6" "$WORK/b.log" \
  mpi 2 train $(train_args "$WORK/run") "${scaled[@]}" --max-steps 6 --inject-overflow 1:3 --resume auto --save-dtype bf16
"$PY" - "$WORK/run/final" "$WORK/run/checkpoint-6" <<'PYEOF' && ok "final/ in bf16, checkpoints in fp32" || bad "--save-dtype"
import json, struct, sys
def dtypes(folder):
    with open(folder + "/model.safetensors", "rb") as f:
        header = json.loads(f.read(struct.unpack("<Q", f.read(8))[0]))
    return {v["dtype"] for k, v in header.items() if k != "__metadata__"}, json.load(open(folder + "/config.json"))["torch_dtype"]
print(dtypes(sys.argv[1]), dtypes(sys.argv[2]))
sys.exit(0 if dtypes(sys.argv[1]) == ({"BF16"}, "bfloat16") and dtypes(sys.argv[2]) == ({"F32"}, "float32") else 1)
PYEOF
"$PY" - "$WORK/run/metrics.jsonl" <<'PYEOF' && ok "resumed steps keep scale 32768" || bad "resume lost the scale"
import json, sys
lines = {e["step"]: e for e in map(json.loads, open(sys.argv[1])) if "loss_scale" in e}
print({s: e["loss_scale"] for s, e in sorted(lines.items())})
sys.exit(0 if lines.get(5, {}).get("loss_scale") == 32768 and lines.get(6, {}).get("loss_scale") == 32768 else 1)
PYEOF

# fp16 on a CPU: a start-up error on every rank that names the option.
mpi 2 train $(train_args "$WORK/fp16") --mixed-precision fp16 --max-steps 1 --log-all-ranks >"$WORK/c.log" 2>&1
code=$?
[[ $code -ne 0 ]] && ok "fp16 on CPU fails (exit $code)" || bad "fp16 on CPU ran"
for rank in 0 1; do
  grep -q "rank $rank.*--mixed-precision fp16 needs --device cuda" "$WORK/c.log" \
    && ok "rank $rank names --mixed-precision" || { bad "rank $rank message"; cat "$WORK/c.log"; }
done
finish
