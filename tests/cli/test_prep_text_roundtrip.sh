# `hpctrain prep text` end to end: the file is readable by h5py with schema v1, the split is stratified,
# the same seed gives the same content, and `inspect` summarizes it.
source "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3

# 100 rows of label "pos", 50 of "neg"; CSV with quotes, an embedded newline and CRLF endings.
{
  printf 'id,sentence,label\r\n'
  for i in $(seq 1 100); do printf '%d,"A fine, ""quoted"" sentence number %d.",pos\r\n' "$i" "$i"; done
  for i in $(seq 1 50); do printf '%d,"Two lines\nof text %d",neg\r\n' "$i" "$i"; done
} >"$WORK/rows.csv"

prep() { "$HPCTRAIN" prep text --input "$WORK/rows.csv" --text-field sentence --label-field label --tokenizer "$TOKENIZER" \
  --max-length 16 --validation-fraction 0.2 --no-progress "$@"; }
expect_success "prep csv" prep --output "$WORK/a.h5" --seed 7
grep -q "train: 120 examples" "$WORK/out" && ok "train count printed" || { bad "train count"; cat "$WORK/out"; }
grep -q "validation: 30 examples" "$WORK/out" && ok "validation count printed" || bad "validation count"
expect_success "h5py reads schema v1" "$PY" "$(dirname "$0")/check_text_h5.py" "$WORK/a.h5" 120 30 neg,pos

# Stratified: 20% of each label in validation (20 pos, 10 neg).
hist=$("$PY" -c "import h5py,numpy as np; f=h5py.File('$WORK/a.h5'); print(np.bincount(f['validation/labels'][:], minlength=2).tolist())")
[[ "$hist" == "[10, 20]" ]] && ok "stratified validation split" || bad "stratified split: $hist"

# Deterministic per seed; a different seed shuffles differently.
expect_success "prep again, same seed" prep --output "$WORK/b.h5" --seed 7
expect_success "prep again, other seed" prep --output "$WORK/c.h5" --seed 8
same() { "$PY" -c "import h5py,numpy as np,sys; a=h5py.File(sys.argv[1]); b=h5py.File(sys.argv[2]); sys.exit(0 if all(np.array_equal(a[k][:], b[k][:]) for k in ['train/input_ids','train/offsets','train/labels','train/source_index']) else 1)" "$@"; }
same "$WORK/a.h5" "$WORK/b.h5" && ok "same seed, same content" || bad "same seed differs"
same "$WORK/a.h5" "$WORK/c.h5" && bad "other seed gives the same order" || ok "other seed, other order"

# Truncation to --max-length; source_index maps back to the input row.
maxlen=$("$PY" -c "import h5py,numpy as np; f=h5py.File('$WORK/a.h5'); print(int(np.diff(f['train/offsets'][:]).max()))")
[[ "$maxlen" -le 16 ]] && ok "max-length respected ($maxlen)" || bad "max-length exceeded: $maxlen"
srcs=$("$PY" -c "import h5py,numpy as np; f=h5py.File('$WORK/a.h5'); s=np.sort(np.concatenate([f['train/source_index'][:], f['validation/source_index'][:]])); print(int((s==np.arange(150)).all()))")
[[ "$srcs" == 1 ]] && ok "source_index covers every row once" || bad "source_index"

# Pairs: token_type_ids present, JSONL input, gzip-compressed, integer labels sorted numerically.
for i in $(seq 1 30); do printf '{"q": "question %d?", "a": "answer %d.", "y": %d}\n' "$i" "$i" $((i % 3 * 5)); done | gzip >"$WORK/pairs.jsonl.gz"
expect_success "prep pairs from jsonl.gz" "$HPCTRAIN" prep text --input "$WORK/pairs.jsonl.gz" --text-field q --text-pair-field a \
  --label-field y --tokenizer "$TOKENIZER" --output "$WORK/pairs.h5" --no-progress
types=$("$PY" -c "import h5py,json; f=h5py.File('$WORK/pairs.h5'); print(json.loads(f.attrs['label_names']), f['train/token_type_ids'].dtype, int(f['train/token_type_ids'][:].max()))")
[[ "$types" == "['0', '5', '10'] uint8 1" ]] && ok "pairs: numeric label order and token_type_ids" || bad "pairs: $types"

# inspect: text and JSON.
expect_success "inspect text" "$HPCTRAIN" inspect "$WORK/a.h5" --validate
grep -q "tokens per example" "$WORK/out" && grep -q "validation: ok" "$WORK/out" && ok "inspect shows lengths" || { bad "inspect text"; cat "$WORK/out"; }
expect_success "inspect json" "$HPCTRAIN" inspect "$WORK/a.h5" --json
"$PY" -c "import json,sys; d=json.load(open('$WORK/out')); s={x['name']:x for x in d['splits']}; sys.exit(0 if s['train']['num_examples']==120 and s['train']['length']['max']<=16 and d['label_names']==['neg','pos'] else 1)" \
  && ok "inspect json fields" || bad "inspect json fields"
expect_failure "inspect a non-HDF5 file" 'rows\.csv' "$HPCTRAIN" inspect "$WORK/rows.csv"

finish
