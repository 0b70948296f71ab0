#!/usr/bin/env bash
# Option parsing rejects what Program_options would silently drop, for every command: a --config that is a
# folder, stray positional words (`--max-steps 2 3`, `--skip-nonfinite false`), and splits the file lacks.
source "$2/tests/cli/hostile_lib.sh" "$@"

# Arguments of each command that parse (the failure comes only from the word under test).
declare -A BASE=(
  [train]="train $(train_args "$WORK/run") --max-steps 1"
  [eval]="eval --model $MODEL --data $WORK/data.h5 --threads 1"
  [predict]="predict --model $MODEL --data $WORK/data.h5 --threads 1 --output $WORK/preds.jsonl"
  [prep]="prep text --input $WORK/rows.jsonl --text-field text --label-field label --tokenizer $WORK/tok --output $WORK/p.h5 --no-progress"
  [inspect]="inspect $WORK/data.h5"
)
for command in train eval predict prep inspect; do
  # shellcheck disable=SC2086
  expect_failure "$command --config DIR" "--config '$WORK' is not a regular file" "$HPCTRAIN" ${BASE[$command]} --config "$WORK"
  expect_failure "$command stray word" "unexpected word 'stray'" "$HPCTRAIN" ${BASE[$command]} stray
done
expect_failure "train --max-steps 2 3" "unexpected word '3' after --max-steps" "$HPCTRAIN" ${BASE[train]} --max-steps 2 3
expect_failure "train --skip-nonfinite false" "unexpected word 'false' after --skip-nonfinite" \
  "$HPCTRAIN" ${BASE[train]} --skip-nonfinite false
expect_failure "eval --json false" "unexpected word 'false' after --json" "$HPCTRAIN" ${BASE[eval]} --json false
expect_failure "inspect two paths" "unexpected word '$WORK/other.h5'" "$HPCTRAIN" inspect "$WORK/data.h5" "$WORK/other.h5"
# Issue 30: integer options bounded before any arithmetic (MiB << 20, batch x ranks x accumulation), named; a
# mistyped option gets the nearest one.
expect_failure "train --cache-mb 2^40" "--cache-mb 1099511627776: expected at most 1073741824" \
  "$HPCTRAIN" ${BASE[train]} --cache-mb 1099511627776
expect_failure "train --batch-size 2^40" "--batch-size 1099511627776: expected at most 16777216" \
  "$HPCTRAIN" ${BASE[train]} --batch-size 1099511627776
expect_failure "eval --cache-mb 2^40" "--cache-mb 1099511627776: expected 1 to 1073741824 MiB" "$HPCTRAIN" ${BASE[eval]} --cache-mb 1099511627776
expect_failure "train --max-stpes (a typo)" "unrecognised option '--max-stpes' \(did you mean --max-steps\?\)" \
  "$HPCTRAIN" ${BASE[train]} --max-stpes 2
# eval and predict show progress as train does: in a pipe, a line on stderr at every tenth of a long split.
expect_success "eval --batch-size 1 (a batch per example)" "$HPCTRAIN" ${BASE[eval]} --batch-size 1 --json
[[ $(grep -cE "^eval: batch [0-9]+/[0-9]+ " "$WORK/err") -eq 10 ]] && "$PY" -c 'import json,sys; json.load(open(sys.argv[1]))' "$WORK/out" \
  && ok "eval: 10 progress lines on stderr, stdout only the JSON" || { bad "eval progress"; cat "$WORK/err"; }
expect_success "predict --no-progress" "$HPCTRAIN" ${BASE[predict]} --batch-size 1 --no-progress --overwrite
grep -q "batch [0-9]*/" "$WORK/err" "$WORK/out" && bad "--no-progress printed progress" || ok "predict --no-progress: no progress lines"
rm -f "$WORK/preds.jsonl"
echo 'max-steps = 1' >"$WORK/ok.cfg"
expect_success "train --config FILE still works" "$HPCTRAIN" ${BASE[train]} --config "$WORK/ok.cfg"
echo 'seed = fast' >"$WORK/bad.cfg"
expect_failure "a bad value in --config names the file" "--config '$WORK/bad.cfg'" "$HPCTRAIN" ${BASE[train]} --config "$WORK/bad.cfg"

# Splits: an explicit --eval-split / --split must exist; the default validation split stays optional.
expect_failure "train --eval-split test" "--eval-split 'test': '$WORK/data.h5' has no such split; it has: train, validation" \
  "$HPCTRAIN" ${BASE[train]} --eval-split test
expect_failure "eval --split test" "$WORK/data.h5: no split 'test'; available: train, validation" "$HPCTRAIN" ${BASE[eval]} --split test
expect_failure "predict --split test" "$WORK/data.h5: no split 'test'; available: train, validation" "$HPCTRAIN" ${BASE[predict]} --split test
"$PY" - "$WORK/data.h5" "$WORK/train-only.h5" <<'PYEOF'
import shutil, sys, h5py
shutil.copy(sys.argv[1], sys.argv[2])
with h5py.File(sys.argv[2], "r+") as f:
    del f["validation"]
PYEOF
expect_success "train without a validation split (default --eval-split)" \
  "$HPCTRAIN" train $(with_file "$WORK/data.h5" "$WORK/train-only.h5" train_args "$WORK/run2") --max-steps 1
"$HPCTRAIN" train --help >"$WORK/help.txt"
if tr -s ' \n' '  ' <"$WORK/help.txt" | grep -q "an explicit --eval-split must exist"; then ok "train --help documents --eval-split"; else bad "train --help"; fi
finish
