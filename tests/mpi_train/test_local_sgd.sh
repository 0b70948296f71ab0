# --local-sgd-steps K on 2 ranks: with K = 1 and plain SGD (no momentum, no clipping) local SGD equals
# ordinary data parallelism, also with 2 accumulated micro-batches; metrics.jsonl's comm_bytes drops about
# K-fold with K = 8; --check-sync-every and evaluation run on averaged parameters; a bad K fails on every rank.
source "$(dirname "$0")/lib.sh"
make_fixture 0.0
steps=(--shuffle global --max-steps 8 --save-steps 100 --eval-steps 8 --optim sgd --max-grad-norm 0
       --lr-scheduler constant --bucket-mb 0.01 --first-bucket-mb 0.004)
LR=5e-2
W=final/model.safetensors
run_ok "DDP" "$WORK/ddp.log" mpi 2 train $(train_args "$WORK/ddp") "${steps[@]}" --batch-size 4
run_ok "local SGD, K = 1" "$WORK/k1.log" mpi 2 train $(train_args "$WORK/k1") "${steps[@]}" --batch-size 4 --local-sgd-steps 1
compare "$WORK/ddp/$W" "$WORK/k1/$W" 1e-5 && ok "K = 1 + SGD == DDP (rel. diff <= 1e-5)" || bad "K = 1 differs from DDP"
run_ok "DDP, 2 x 2 accumulated" "$WORK/ddp-acc.log" mpi 2 train $(train_args "$WORK/ddp-acc") "${steps[@]}" \
  --batch-size 2 --gradient-accumulation-steps 2
run_ok "local SGD, K = 1, 2 x 2 accumulated" "$WORK/k1-acc.log" mpi 2 train $(train_args "$WORK/k1-acc") "${steps[@]}" \
  --batch-size 2 --gradient-accumulation-steps 2 --local-sgd-steps 1
compare "$WORK/ddp-acc/$W" "$WORK/k1-acc/$W" 1e-5 && ok "K = 1 + SGD == DDP with accumulation" \
  || bad "K = 1 with accumulation differs from DDP"
run_ok "local SGD, K = 8, --check-sync-every 3" "$WORK/k8.log" mpi 2 train $(train_args "$WORK/k8") "${steps[@]}" \
  --batch-size 4 --local-sgd-steps 8 --check-sync-every 3
# Not vacuous: without averaging every step the parameters differ from DDP's.
compare "$WORK/ddp/$W" "$WORK/k8/$W" 1e-5 >/dev/null && bad "K = 8 equals DDP (the comparison cannot fail?)" \
  || ok "K = 8 differs from DDP"

# comm_bytes: every line has it; K = 8 sends about 8x fewer bytes than DDP over the same steps.
"$PY" - "$WORK/ddp/metrics.jsonl" "$WORK/k1/metrics.jsonl" "$WORK/k8/metrics.jsonl" <<'PYEOF' \
  && ok "comm_bytes in metrics.jsonl; K = 8 sends ~8x fewer bytes" || bad "comm_bytes"
import json, sys
def total(path):
    lines = [json.loads(l) for l in open(path) if '"comm_bytes"' in l]
    steps = [l for l in open(path) if '"loss"' in l and "eval_loss" not in l]
    assert len(lines) == len(steps) == 8, (path, len(lines), len(steps))
    return sum(l["comm_bytes"] for l in lines)
ddp, k1, k8 = (total(p) for p in sys.argv[1:])
print("comm_bytes over 8 steps: DDP", ddp, "K=1", k1, "K=8", k8, "ratio", ddp / k8)
sys.exit(0 if ddp > 0 and abs(k1 - ddp) <= 0.01 * ddp and 5 <= ddp / k8 <= 9 else 1)
PYEOF

out=$(mpi 2 train $(train_args "$WORK/bad") "${steps[@]}" --local-sgd-steps -2 2>&1)
[[ $? -ne 0 ]] && [[ $(grep -c -- "--local-sgd-steps -2: expected an integer >= 0" <<<"$out") -ge 1 ]] \
  && ok "--local-sgd-steps -2 is refused, naming the option" || { bad "--local-sgd-steps -2"; echo "$out" | tail -5; }
# Loss scaling agrees on overflow through the averaged gradients (Note [Found-inf agreement]): refused on both ranks.
out=$(mpi 2 train $(train_args "$WORK/scaled") "${steps[@]}" --local-sgd-steps 2 --loss-scale dynamic 2>&1)
[[ $? -ne 0 ]] && [[ $(grep -c -- "--local-sgd-steps 2 with loss scaling" <<<"$out") -ge 2 ]] \
  && ok "--local-sgd-steps with loss scaling is refused on both ranks" || { bad "local SGD + loss scaling"; echo "$out" | tail -5; }
finish
