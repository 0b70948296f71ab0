# Ranks started with different options or datasets (Note [Agreed options]), under mpirun's MPMD syntax
# (`-np 1 hpctrain train A : -np 1 hpctrain train B`): each case used to hang (accumulation steps,
# --check-sync-every), end with a bare MPI_ERR_TRUNCATE (batch size, --max-steps) or train silently wrong
# (lr, seed, shuffle, another dataset of the same size). Now each ends within seconds, non-zero, naming the
# option and both ranks' values. Options that may differ (--threads, logging) and one file reached by two
# path spellings still train.
source "$(dirname "$0")/lib.sh"
make_fixture 0.0

# data2.h5: the same rows, labels and token counts with each text's words reversed: another dataset of the
# same size (same splits, same file size), which only the content digest tells apart.
"$PY" - "$WORK/rows.jsonl" "$WORK/rows2.jsonl" <<'PYEOF'
import json, sys
with open(sys.argv[1]) as rows, open(sys.argv[2], "w") as out:
    for line in rows:
        row = json.loads(line)
        row["text"] = " ".join(reversed(row["text"].split()))
        out.write(json.dumps(row) + "\n")
PYEOF
"$HPCTRAIN" prep text --input "$WORK/rows2.jsonl" --text-field text --label-field label --tokenizer "$WORK/tok" \
  --max-length 16 --validation-fraction 0.2 --seed 3 --compression none --no-progress --output "$WORK/data2.h5" \
  >"$WORK/prep2.log" 2>&1 || { cat "$WORK/prep2.log"; exit 1; }
ln -s "$WORK" "$WORK/mount"  # the same files under another path, as another node may mount them

case_number=0
# two_ranks COMMAND "RANK 0 ARGS" "RANK 1 ARGS" > LOG: one rank with each argument list, at most 60 s.
two_ranks() {
  timeout 60 "$MPIEXEC" --oversubscribe --bind-to none -np 1 "$HPCTRAIN" $1 $2 : -np 1 "$HPCTRAIN" $1 $3
}
# args OUTPUT [LR] [DATA]: the fixture's train options, with this rank's --lr and --data.
args() { LR=${2:-1e-3} train_args "$1" | sed "s|--data [^ ]*|--data ${3:-$WORK/data.h5}|"; }

# mismatch NAME PATTERN "RANK 0 ARGS" "RANK 1 ARGS" [COMMAND]: non-zero within 30 s, output matches PATTERN.
mismatch() {
  local name=$1 pattern=$2 rank0=$3 rank1=$4 command=${5:-train}
  local start=$(date +%s)
  two_ranks "$command" "$rank0" "$rank1" >"$WORK/case.log" 2>&1
  local rc=$? elapsed=$(( $(date +%s) - start ))
  if [[ $rc -eq 0 || $rc -eq 124 || $elapsed -gt 30 ]]; then bad "$name: exit $rc after ${elapsed}s"; cat "$WORK/case.log"; return; fi
  if grep -Eq -- "$pattern" "$WORK/case.log"; then ok "$name (${elapsed}s)"; else bad "$name: no /$pattern/"; cat "$WORK/case.log"; fi
}

# mismatch_train NAME PATTERN "RANK 0 EXTRA" "RANK 1 EXTRA" [LR0 LR1] [DATA0 DATA1]
mismatch_train() {
  case_number=$((case_number + 1))
  local out="$WORK/run$case_number"
  mismatch "$1" "$2" "$(args "$out" "${5:-}" "${7:-}") $3" "$(args "$out" "${6:-}" "${8:-}") $4"
}

mismatch_train "accumulation steps (was a hang)" \
  "--gradient-accumulation-steps differs across ranks: rank 0 has 2, rank 1 has 4" \
  "--max-steps 3 --gradient-accumulation-steps 2" "--max-steps 3 --gradient-accumulation-steps 4"
mismatch_train "replica checks (was a hang)" "--check-sync-every differs across ranks: rank 0 has 0, rank 1 has 1" \
  "--max-steps 3" "--max-steps 3 --check-sync-every 1"
mismatch_train "batch size (was MPI_ERR_TRUNCATE)" "--batch-size differs across ranks: rank 0 has 4, rank 1 has 8" \
  "--max-steps 3 --batch-size 4" "--max-steps 3 --batch-size 8"
mismatch_train "max steps" "--max-steps differs across ranks: rank 0 has 3, rank 1 has 5" "--max-steps 3" "--max-steps 5"
mismatch_train "learning rate (was silent)" "--lr differs across ranks: rank 0 has 0.001, rank 1 has 0.002" \
  "--max-steps 3" "--max-steps 3" 1e-3 2e-3
mismatch_train "seed (was silent)" "--seed differs across ranks: rank 0 has 1, rank 1 has 2" \
  "--max-steps 3 --seed 1" "--max-steps 3 --seed 2"
mismatch_train "shuffle (was silent)" "--shuffle differs across ranks: rank 0 has shard, rank 1 has global" \
  "--max-steps 3 --shuffle shard" "--max-steps 3 --shuffle global"
mismatch_train "another dataset of the same size (was silent)" \
  "--data \(content digest\) differs across ranks: rank 0 has sha256:[0-9a-f]+, rank 1 has sha256:[0-9a-f]+" \
  "--max-steps 3" "--max-steps 3" "" "" "$WORK/data.h5" "$WORK/data2.h5"
grep -q -- "--data (splits) differs" "$WORK/case.log" && bad "data2.h5 was meant to have the same splits" || true
grep -q "disagree on the options of \`hpctrain train\` and its dataset" "$WORK/case.log" && ok "the message says what disagrees" \
  || bad "no 'disagree on' line"

# What may differ: --threads, logging, and the path spelling of one file.
run_ok "same file at another path, other threads and logging: trains" "$WORK/same.log" \
  two_ranks train "$(args "$WORK/same") --max-steps 2" \
  "$(args "$WORK/same" 1e-3 "$WORK/mount/data.h5" | sed 's/--threads 1/--threads 2/') --max-steps 2 --log-all-ranks \
   --trace-examples $WORK/trace"
[[ -d "$WORK/same/final" ]] && ok "that run wrote its final model" || bad "no final model"

# eval and predict agree too.
eval_args="--model $WORK/same/final --threads 1 --device cpu"
mismatch "eval: batch size" "--batch-size differs across ranks: rank 0 has 4, rank 1 has 8" \
  "$eval_args --data $WORK/data.h5 --batch-size 4" "$eval_args --data $WORK/data.h5 --batch-size 8" eval
mismatch "predict: another dataset" "--data \(content digest\) differs across ranks" \
  "$eval_args --data $WORK/data.h5 --output $WORK/p.jsonl" "$eval_args --data $WORK/data2.h5 --output $WORK/p.jsonl" predict
run_ok "eval on one file at two paths" "$WORK/eval.log" \
  two_ranks eval "$eval_args --data $WORK/data.h5" "--model $WORK/mount/same/final --threads 2 --device cpu --data $WORK/mount/data.h5"
finish
