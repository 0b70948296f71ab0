# --zero-stage 3's bytes on the wire and state per rank (docs/zero.md, "Bytes on the wire (stage 3)", "Memory"):
# comm_bytes per step exactly the documented formula at 2 ranks (1.5x stage 0's with resharding after forward,
# 1x without, plus padding, the norm and the flags), model_state_bytes at 4 ranks <= 0.30x stage 0's, and
# stage 3 == stage 0 on 4 ranks (--oversubscribe) after 8 AdamW steps with clipping and accumulation.
source "$(dirname "$0")/lib.sh"
make_fixture 0.0
source "$HERE/zero3_lib.sh"

# ---- 4 ranks: the state per rank, and stage 3 == stage 0 ----
for s in 0 3; do zero_run "bert4-$s" 4 $s; done
# On 4 ranks the reduce-scatter sums the ranks' gradients in another order than the allreduce: the key biases,
# whose exact gradient is 0, are rounding noise that AdamW's normalization turns into steps (compare_weights.py).
same "DistilBERT, 4 ranks: stage 3 == stage 0" bert4-0 bert4-3 --skip k_lin.bias

# ---- bytes on the wire at 2 ranks, one micro-batch per step ----
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
finish
