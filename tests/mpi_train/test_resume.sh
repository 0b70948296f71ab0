# Resume: after an interruption the run continues exactly (same ranks, dropout on: the loss curve and
# weights equal the uninterrupted run's); on another number of ranks (--shuffle global) it continues at
# the right sample: every example of the epoch is trained on exactly once.
source "$(dirname "$0")/lib.sh"
make_fixture 0.1

# --- same ranks: stop at step 7 (mid-epoch: 10 steps per epoch), resume to 14 (AdamW; other optimizers:
# test_resume_optimizers.sh) ---
check_exact_resume "adamw" "$WORK/adamw" 1e-6

# --- resuming with another --seed: the checkpoint's seed wins, for the data order and for the dropout masks
# (Note [Dropout seeds]), and the log says so; the run ends as the uninterrupted one (seed 42) ---
exact=(--lr-scheduler constant --warmup-steps 3 --save-steps 4 --batch-size 4)
run_ok "seed: first 7 steps (seed 42)" "$WORK/seed-a.log" mpi 2 train $(train_args "$WORK/seed") "${exact[@]}" --max-steps 7
run_ok "seed: resume auto to 14 with --seed 9" "$WORK/seed-b.log" mpi 2 train $(train_args "$WORK/seed") "${exact[@]}" \
  --max-steps 14 --resume auto --seed 9
grep -q "seed 42 from the checkpoint (not 9)" "$WORK/seed-b.log" && ok "seed: the log names both seeds" \
  || { bad "seed: no note"; head -20 "$WORK/seed-b.log"; }
compare "$WORK/adamw-whole/final/model.safetensors" "$WORK/seed/final/model.safetensors" 1e-6 \
  && ok "seed: resumed with --seed 9 == uninterrupted" || bad "seed: --seed 9 changed the resumed run"

# --- other numbers of ranks, --shuffle global: 2 ranks x 4 for 3 steps (24 samples), then the epoch's rest ---
global=(--shuffle global --epochs 1 --save-steps 100 --eval-steps 100)
check_epoch() {  # check_epoch NAME TRACE_DIR: epoch 0's trained examples are all TRAIN_N, each once
  "$PY" - "$2" "$TRAIN_N" <<'PYEOF' && ok "$1: every example of the epoch exactly once" || bad "$1: examples skipped or repeated"
import collections, glob, sys
seen = [int(l.split()[2]) for f in glob.glob(sys.argv[1] + "/examples-rank*.txt") for l in open(f) if l.split()[0] == "0"]
n = int(sys.argv[2])
counts = collections.Counter(seen)
repeated = [e for e, c in counts.items() if c > 1]
print(f"{len(seen)} trained, {len(counts)} distinct, repeated {repeated[:10]}, missing {sorted(set(range(n)) - set(counts))[:10]}")
sys.exit(0 if len(seen) == n and sorted(counts) == list(range(n)) else 1)
PYEOF
}
for target in "1 4 per-rank batch 4 -> 8" "3 3 global batch changes from 8 to 9"; do
  read -r np batch note <<<"$target"
  out="$WORK/w$np"
  run_ok "2 ranks, 3 steps (-> $np)" "$WORK/w$np-a.log" mpi 2 train $(train_args "$out") "${global[@]}" --batch-size 4 \
    --max-steps 3 --trace-examples "$out/trace"
  run_ok "resume on $np rank(s)" "$WORK/w$np-b.log" mpi "$np" train $(train_args "$out") "${global[@]}" \
    --batch-size "$batch" --resume auto --trace-examples "$out/trace"
  grep -q "$note" "$WORK/w$np-b.log" && ok "says: $note" || { bad "note '$note'"; head -20 "$WORK/w$np-b.log"; }
  grep -q "continuing epoch 0 at sample 24" "$WORK/w$np-b.log" && ok "continues at sample 24" || bad "sample position"
  check_epoch "2 -> $np ranks" "$out/trace"
  "$PY" -c "import json,sys; s=json.load(open('$out/trainer_state.json'))['hpctrain']; sys.exit(0 if s['samples_seen']==$TRAIN_N and s['epoch_index']==1 else 1)" \
    && ok "trainer_state: $TRAIN_N samples seen, epoch complete" || bad "trainer_state counters"
done
finish
