#!/usr/bin/env bash
# Data checked before use: examples without tokens (made with h5py), truncated files whose errors name the
# file, and JSONL with invalid UTF-8 read as U+FFFD with the token ids Hugging Face gets.
source "$2/tests/cli/hostile_lib.sh" "$@"

# ---- examples without tokens (Note [Examples have tokens]) ----
"$PY" - "$WORK/data.h5" "$WORK/empty.h5" <<'PYEOF'
import shutil, sys, h5py
shutil.copy(sys.argv[1], sys.argv[2])
with h5py.File(sys.argv[2], "r+") as f:
    offsets = f["train/offsets"]
    offsets[1:5] = 0  # examples 0..3 hold no tokens; example 4 takes theirs
PYEOF
expect_failure "inspect --validate: an example without tokens" "$WORK/empty.h5:/train: example 0 has no tokens" \
  "$HPCTRAIN" inspect "$WORK/empty.h5" --validate
expect_failure "train: an example without tokens" "$WORK/empty.h5:/train: example [0-3] has no tokens" \
  "$HPCTRAIN" train $(with_file "$WORK/data.h5" "$WORK/empty.h5" train_args "$WORK/run-empty") --batch-size 4 --shuffle none

# ---- truncated files: every error names the file ----
head -c $(($(stat -c %s "$WORK/data.h5") / 2)) "$WORK/data.h5" >"$WORK/truncated.h5"
expect_failure "inspect a truncated .h5" "$WORK/truncated.h5" "$HPCTRAIN" inspect "$WORK/truncated.h5" --validate
expect_failure "eval on a truncated .h5" "$WORK/truncated.h5" "$HPCTRAIN" eval --model "$MODEL" --data "$WORK/truncated.h5" --threads 1
expect_failure "train on a truncated .h5" "$WORK/truncated.h5" \
  "$HPCTRAIN" train $(with_file "$WORK/data.h5" "$WORK/truncated.h5" train_args "$WORK/run-trunc")
cp -r "$WORK/model/checkpoint-1" "$WORK/ckpt"
head -c 40 "$WORK/model/checkpoint-1/trainer_state.json" >"$WORK/ckpt/trainer_state.json"
rm "$WORK/ckpt/checksums.sha256"  # as a checkpoint from before manifests: the JSON parser meets the cut file
expect_failure "resume from a truncated trainer_state.json" "$WORK/ckpt/trainer_state.json: not valid JSON" \
  "$HPCTRAIN" train $(train_args "$WORK/run-resume") --resume "$WORK/ckpt"
cp -r "$MODEL" "$WORK/cut-config" && head -c 30 "$MODEL/config.json" >"$WORK/cut-config/config.json"
expect_failure "eval: a truncated config.json" "$WORK/cut-config/config.json" \
  "$HPCTRAIN" eval --model "$WORK/cut-config" --data "$WORK/data.h5" --threads 1
cp -r "$MODEL" "$WORK/cut-weights" && head -c 100 "$MODEL/model.safetensors" >"$WORK/cut-weights/model.safetensors"
expect_failure "eval: a truncated model.safetensors" "$WORK/cut-weights/model.safetensors" \
  "$HPCTRAIN" eval --model "$WORK/cut-weights" --data "$WORK/data.h5" --threads 1
cp -r "$WORK/tok" "$WORK/cut-tok" && echo '{"do_lower_case": tr' >"$WORK/cut-tok/tokenizer_config.json"
expect_failure "prep: a truncated tokenizer_config.json" "$WORK/cut-tok/tokenizer_config.json" \
  "$HPCTRAIN" prep text --input "$WORK/rows.jsonl" --text-field text --label-field label --tokenizer "$WORK/cut-tok" \
  --no-progress --output "$WORK/x.h5"

# ---- JSONL with invalid UTF-8: U+FFFD as in CSV, the ids of Hugging Face on errors="replace" ----
"$PY" - "$REPO/tests/tokenize/golden/cases.jsonl" "$WORK/invalid.jsonl" "$WORK/expected.json" <<'PYEOF'
import json, sys
cases = [json.loads(l) for l in open(sys.argv[1])]
cases = [c for c in cases if c["variant"] == "uncased" and "text_hex" in c]
with open(sys.argv[2], "wb") as out:
    for i, case in enumerate(cases):
        raw = bytes.fromhex(case["text_hex"])
        text = bytearray()
        for b in raw:  # raw bytes, only what JSON requires escaped
            text += b'\\"' if b == 0x22 else b'\\\\' if b == 0x5C else b'\\u%04x' % b if b < 0x20 else bytes([b])
        out.write(b'{"text": "' + bytes(text) + b'", "label": "' + (b"a" if i % 2 else b"b") + b'"}\n')
json.dump([c["input_ids"] for c in cases], open(sys.argv[3], "w"))
PYEOF
expect_success "prep text on JSONL with invalid UTF-8" "$HPCTRAIN" prep text --input "$WORK/invalid.jsonl" --text-field text \
  --label-field label --tokenizer "$TOKENIZER" --max-length 512 --no-progress --output "$WORK/invalid.h5"
if grep -Eq "[0-9]+ rows held invalid UTF-8" "$WORK/err"; then ok "invalid UTF-8 rows are counted"; else bad "no count"; cat "$WORK/err"; fi
"$PY" - "$WORK/invalid.h5" "$WORK/expected.json" <<'PYEOF' >"$WORK/compare.log" 2>&1
import json, sys, h5py
expected = json.load(open(sys.argv[2]))
with h5py.File(sys.argv[1], "r") as f:
    ids, offsets, rows = f["train/input_ids"][:], f["train/offsets"][:], f["train/source_index"][:]
bad = 0
for k, row in enumerate(rows):
    got = list(ids[offsets[k]:offsets[k + 1]])
    want = expected[row]
    if got != want:
        bad += 1
        print(f"row {row}: got {got}, expected {want}")
print(f"{len(rows)} rows compared, {bad} differ")
sys.exit(1 if bad or len(rows) != len(expected) else 0)
PYEOF
if [[ $? -eq 0 ]]; then ok "token ids equal the reference's on invalid UTF-8 ($(tail -1 "$WORK/compare.log"))"
else bad "token ids differ"; cat "$WORK/compare.log"; fi
finish
