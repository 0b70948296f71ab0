# optimizer_state_bytes on metrics.jsonl (Note [Optimizer state bytes]): every training line carries it, on 2
# ranks and on 1; with AdamW it equals 8 bytes per trainable fp32 parameter (counted from final/model.safetensors,
# not from the optimizer), with plain SGD (no momentum) 0; it is not counted in comm_bytes (the bytes a run
# reports over the same steps are the same at --logging-steps 1 and 3). The max over ranks of different
# optimizers: mpi.train.optimizer_state_max.
source "$(dirname "$0")/lib.sh"
make_fixture 0.0
steps=(--max-steps 5 --save-steps 100 --eval-steps 100 --batch-size 4 --lr-scheduler constant)
run_ok "AdamW, 2 ranks, --logging-steps 1" "$WORK/adamw.log" mpi 2 train $(train_args "$WORK/adamw") "${steps[@]}"
run_ok "AdamW, 2 ranks, --logging-steps 3" "$WORK/adamw3.log" mpi 2 train \
  $(train_args "$WORK/adamw3" | sed 's/--logging-steps 1/--logging-steps 3/') "${steps[@]}"
run_ok "AdamW, 1 rank" "$WORK/one.log" mpi 1 train $(train_args "$WORK/one") "${steps[@]}"
run_ok "SGD, 2 ranks" "$WORK/sgd.log" mpi 2 train $(train_args "$WORK/sgd") "${steps[@]}" --optim sgd

"$PY" - "$WORK" <<'PYEOF' && ok "optimizer_state_bytes = 8 B per parameter (AdamW), 0 (SGD), on every line" \
  || bad "optimizer_state_bytes"
import json, struct, sys
work = sys.argv[1]
def parameters(path):  # elements of every tensor in a safetensors file (its JSON header)
    with open(path, "rb") as f:
        header = json.loads(f.read(struct.unpack("<Q", f.read(8))[0]))
    total = 0
    for name, entry in header.items():
        if name != "__metadata__":
            n = 1
            for d in entry["shape"]: n *= d
            total += n
    return total
def lines(run):
    return [e for e in map(json.loads, open(f"{work}/{run}/metrics.jsonl")) if "loss" in e and "eval_loss" not in e]
n = parameters(f"{work}/adamw/final/model.safetensors")
print("trainable parameters:", n)
ok = n > 1000
for run, steps, per_param in (("adamw", [1, 2, 3, 4, 5], 8), ("adamw3", [3, 5], 8), ("one", [1, 2, 3, 4, 5], 8),
                              ("sgd", [1, 2, 3, 4, 5], 0)):
    got = [(e["step"], e.get("optimizer_state_bytes")) for e in lines(run)]
    print(run, got)
    ok = ok and got == [(s, per_param * n) for s in steps]
sys.exit(0 if ok else 1)
PYEOF

"$PY" - "$WORK/adamw/metrics.jsonl" "$WORK/adamw3/metrics.jsonl" <<'PYEOF' \
  && ok "comm_bytes over 5 steps the same at --logging-steps 1 and 3 (the max-allreduce is not counted)" \
  || bad "comm_bytes depends on the logging interval"
import json, sys
totals = [sum(e.get("comm_bytes", 0) for e in map(json.loads, open(p))) for p in sys.argv[1:]]
print("comm_bytes over 5 steps:", totals)
sys.exit(0 if totals[0] > 0 and totals[0] == totals[1] else 1)
PYEOF
finish
