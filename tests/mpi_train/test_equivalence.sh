# The central equivalence: the same run (--shuffle global, dropout off) on 1 rank with per-rank batch 8
# and on 2 ranks with batch 4 (the same global batches) gives the same parameters after several steps;
# overlap on and off, and 2 micro-batches of 2 per rank, give the same parameters too.
source "$(dirname "$0")/lib.sh"
make_fixture 0.0
steps=(--shuffle global --max-steps 6 --warmup-steps 2 --save-steps 100 --eval-steps 100)
LR=5e-3
small_buckets=(--bucket-mb 0.01 --first-bucket-mb 0.004)  # several buckets: overlap has work to do

run_ok "1 rank, batch 8" "$WORK/one.log" mpi 1 train $(train_args "$WORK/one") "${steps[@]}" --batch-size 8
run_ok "2 ranks, batch 4, overlap on" "$WORK/two.log" mpi 2 train $(train_args "$WORK/two") "${steps[@]}" \
  --batch-size 4 "${small_buckets[@]}" --overlap on
run_ok "2 ranks, batch 4, overlap off" "$WORK/off.log" mpi 2 train $(train_args "$WORK/off") "${steps[@]}" \
  --batch-size 4 "${small_buckets[@]}" --overlap off
run_ok "2 ranks, 2 x 2 accumulated" "$WORK/acc.log" mpi 2 train $(train_args "$WORK/acc") "${steps[@]}" \
  --batch-size 2 --gradient-accumulation-steps 2

grep -q "global batch 8 = 4 per rank x 2 rank(s) x 1 accumulation" "$WORK/two.log" && ok "global batch printed" \
  || { bad "global batch line"; head -20 "$WORK/two.log"; }
grep -q "overlap off" "$WORK/off.log" && ok "overlap off reported" || bad "overlap off not reported"
grep -Eq "[0-9]+ bucket\(s\), overlap on" "$WORK/two.log" && ok "overlap on reported" || bad "overlap on not reported"

W=final/model.safetensors
compare "$WORK/one/$W" "$WORK/two/$W" 1e-5 && ok "1 rank x 8 == 2 ranks x 4 (rel. diff <= 1e-5)" || bad "1 vs 2 ranks differ"
compare "$WORK/two/$W" "$WORK/off/$W" 1e-6 && ok "overlap on == overlap off" || bad "overlap on/off differ"
compare "$WORK/one/$W" "$WORK/acc/$W" 1e-5 && ok "accumulation 2 x 2 == batch 8" || bad "accumulation differs"
# The same loss at every step; not vacuous: the loss moves, so the weights do.
"$PY" - "$WORK/one/metrics.jsonl" "$WORK/two/metrics.jsonl" <<'PYEOF' && ok "same loss curve, and it moves" || bad "loss curves"
import json, sys
def curve(path):
    return [json.loads(l)["loss"] for l in open(path) if '"loss"' in l and "eval_loss" not in l]
a, b = curve(sys.argv[1]), curve(sys.argv[2])
print("1 rank:", a); print("2 ranks:", b)
sys.exit(0 if len(a) == 6 and all(abs(x - y) <= 1e-5 * max(1, abs(x)) for x, y in zip(a, b)) and max(a) - min(a) > 1e-3 else 1)
PYEOF
finish
