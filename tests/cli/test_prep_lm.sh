# `hpctrain prep lm` end to end: rows checked with h5py against ids made by Hugging Face tokenizers
# (tests/prep/golden/lm_documents.json) for the gpt2 and llama3 golden tokenizers, packed and not; several inputs
# concatenated in order; `mpirun -np 2` and a tiny --memory-mb ≡ one process; a validation split of whole
# documents; a bad row named with no output left; the inputs never overwritten; train refuses the file clearly.
source "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
MPIRUN=(timeout 120 mpirun --oversubscribe --bind-to none -np 2)
GOLDEN="$REPO/tests/prep/golden/lm_documents.json"
BPE="$REPO/tests/tokenize/golden/bpe"
check() { "$PY" "$(dirname "$0")/check_lm_h5.py" "$@"; }
same() { "$PY" "$(dirname "$0")/prep_same_datasets.py" "$@"; }

# The golden documents: the first 20 in a.jsonl, the others in b.csv (quoted fields with commas and newlines).
"$PY" - "$WORK" "$GOLDEN" <<'PYEOF'
import csv, json, sys
work, golden = sys.argv[1], json.load(open(sys.argv[2]))
docs = golden["documents"]
with open(f"{work}/a.jsonl", "w") as f:
    for i, text in enumerate(docs[:20]):
        f.write(json.dumps({"id": i, "text": text}, ensure_ascii=False) + "\n")
with open(f"{work}/b.csv", "w", newline="") as f:
    writer = csv.writer(f)
    writer.writerow(["id", "body"])
    for i, text in enumerate(docs[20:]):
        writer.writerow([i, text])
with open(f"{work}/all.jsonl", "w") as f:
    for text in docs:
        f.write(json.dumps({"body": text}, ensure_ascii=False) + "\n")
PYEOF

lm() { "$HPCTRAIN" prep lm --no-progress --threads 2 "$@"; }
for name in gpt2 llama3; do
  # One --text-field for both files: b.csv's column is "body", so a.jsonl's key is renamed too.
  sed 's/"text"/"body"/' "$WORK/a.jsonl" >"$WORK/a-body.jsonl"
  two=(--input "$WORK/a-body.jsonl" "$WORK/b.csv" --text-field body --tokenizer "$BPE/$name")
  expect_success "$name: packed rows of 16" lm "${two[@]}" --block-size 16 --output "$WORK/$name.h5"
  check "$WORK/$name.h5" "$GOLDEN" "$name" group 16 20 && ok "$name: packed rows = the reference ids cut in 16s" || bad "$name: packed rows"
  expect_success "$name: --packing none --max-length 24" lm "${two[@]}" --packing none --max-length 24 --output "$WORK/$name-none.h5"
  check "$WORK/$name-none.h5" "$GOLDEN" "$name" none 24 20 && ok "$name: one row per document, cut to 24" || bad "$name: unpacked rows"
done
grep -q "documents were cut to 24 tokens" "$WORK/out" "$WORK/err" && ok "cut documents counted" || bad "cut documents not reported"

# One input, default block size: min(1024, model_max_length) = 1024 > these 2900 tokens' rows: 2 rows.
expect_success "default block size" lm --input "$WORK/all.jsonl" --text-field body --tokenizer "$BPE/gpt2" --output "$WORK/default.h5"
check "$WORK/default.h5" "$GOLDEN" gpt2 group 1024 && ok "default block size is 1024" || bad "default block size"

# Ranks, memory and gzip do not change the file.
args=(--input "$WORK/all.jsonl" --text-field body --tokenizer "$BPE/llama3" --block-size 8 --validation-fraction 0.25 --seed 9)
expect_success "one process" lm "${args[@]}" --output "$WORK/one.h5"
expect_success "mpirun -np 2" "${MPIRUN[@]}" "$HPCTRAIN" prep lm --no-progress --threads 1 "${args[@]}" --output "$WORK/two.h5" \
  --memory-mb 2
same "$WORK/one.h5" "$WORK/two.h5" && ok "2 ranks ≡ one process" || bad "2 ranks differ"
# 3000 documents (1.5 MB) in --memory-mb 2: several blocks of documents per rank and several buckets of rows.
"$PY" - "$WORK" <<'PYEOF'
import json, random, sys
rng = random.Random(4)
words = ["data", "parallel", "training", "ranks", "tokens", "rows", "blocks", "the", "a", "and", "42", "don't"]
with open(f"{sys.argv[1]}/large.jsonl", "w") as f:
    for i in range(3000):
        f.write(json.dumps({"text": f"doc {i} " + " ".join(rng.choice(words) for _ in range(rng.randint(1, 160)))}) + "\n")
PYEOF
large=(--input "$WORK/large.jsonl" --tokenizer "$BPE/gpt2" --block-size 512 --validation-fraction 0.1)
expect_success "large: one process" lm "${large[@]}" --output "$WORK/large1.h5"
expect_success "large: --memory-mb 2" lm "${large[@]}" --output "$WORK/large-small.h5" --memory-mb 2
expect_success "large: mpirun -np 2 --memory-mb 2" "${MPIRUN[@]}" "$HPCTRAIN" prep lm --no-progress --threads 1 "${large[@]}" \
  --output "$WORK/large2.h5" --memory-mb 2
same "$WORK/large1.h5" "$WORK/large-small.h5" && ok "large: small memory ≡ one process" || bad "large: small memory differs"
same "$WORK/large1.h5" "$WORK/large2.h5" && ok "large: 2 ranks ≡ one process" || bad "large: 2 ranks differ"
gzip -k "$WORK/all.jsonl"
expect_success "jsonl.gz: mpirun -np 2" "${MPIRUN[@]}" "$HPCTRAIN" prep lm --no-progress --threads 1 --input "$WORK/all.jsonl.gz" \
  "${args[@]:2}" --output "$WORK/gz2.h5"
same "$WORK/one.h5" "$WORK/gz2.h5" && ok "jsonl.gz: 2 ranks ≡ the plain input in one process" || bad "jsonl.gz: 2 ranks differ"
none=(--input "$WORK/all.jsonl" --text-field body --tokenizer "$BPE/gpt2" --packing none --validation-fraction 0.25)
expect_success "unpacked, one process" lm "${none[@]}" --output "$WORK/none1.h5"
expect_success "unpacked, mpirun -np 2" "${MPIRUN[@]}" "$HPCTRAIN" prep lm --no-progress --threads 1 "${none[@]}" --output "$WORK/none2.h5"
same "$WORK/none1.h5" "$WORK/none2.h5" && ok "unpacked: 2 ranks ≡ one process" || bad "unpacked: 2 ranks differ"

# --validation-fraction splits documents: each one in exactly one split; --validation-input is a whole split.
split=$("$PY" -c "
import h5py, sys
f = h5py.File(sys.argv[1])
t, v = set(f['train/source_index'][:].tolist()), set(f['validation/source_index'][:].tolist())
print(len(t), len(v), len(t & v), len(t | v))" "$WORK/none1.h5")
[[ "$split" == "37 12 0 49" ]] && ok "validation fraction: 12 of 49 documents, none in both splits" || bad "validation split: $split"
expect_success "--validation-input" lm --input "$WORK/a-body.jsonl" --validation-input "$WORK/b.csv" --text-field body \
  --tokenizer "$BPE/gpt2" --packing none --output "$WORK/vi.h5"
counts=$("$PY" -c "import h5py,sys; f=h5py.File(sys.argv[1]); print(f['train'].attrs['num_examples'], f['validation'].attrs['num_examples'])" "$WORK/vi.h5")
[[ "$counts" == "20 29" ]] && ok "--validation-input: the second file is the validation split" || bad "--validation-input: $counts"

# A bad row is named (here in rank 1's part) and nothing is left behind; --skip-invalid counts it.
sed '40s/.*/{"body": "cut off/' "$WORK/all.jsonl" >"$WORK/bad.jsonl"
expect_failure "a bad row fails the job, named" 'failed on rank 1: .*bad\.jsonl: line 40 \(row 39\): malformed JSON' \
  "${MPIRUN[@]}" "$HPCTRAIN" prep lm --no-progress --input "$WORK/bad.jsonl" --text-field body --tokenizer "$BPE/gpt2" --output "$WORK/bad.h5"
expect_no_file "no output after the bad row" "$WORK/bad.h5"
expect_failure "a missing text field is named" 'bad\.jsonl: line 1 \(row 0\): missing field .text.' \
  lm --input "$WORK/bad.jsonl" --tokenizer "$BPE/gpt2" --output "$WORK/bad.h5"
expect_success "--skip-invalid" lm --input "$WORK/bad.jsonl" --text-field body --tokenizer "$BPE/gpt2" --output "$WORK/skip.h5" --skip-invalid
grep -q "skipped 1 rows: malformed row" "$WORK/out" "$WORK/err" && ok "--skip-invalid counts the bad row" || bad "skipped count"

# The inputs are never overwritten, even with --overwrite; options that exclude each other; a tokenizer without EOS.
sum=$(md5sum <"$WORK/all.jsonl")
expect_failure "refuses to overwrite the input" "is the input .*refusing to overwrite" \
  lm --input "$WORK/all.jsonl" --text-field body --tokenizer "$BPE/gpt2" --output "$WORK/all.jsonl" --overwrite
[[ "$(md5sum <"$WORK/all.jsonl")" == "$sum" ]] && ok "the input is unchanged" || bad "the input changed"
expect_failure "an existing output needs --overwrite" "exists; pass --overwrite" \
  lm --input "$WORK/all.jsonl" --text-field body --tokenizer "$BPE/gpt2" --output "$WORK/one.h5"
expect_failure "--block-size with --packing none" "--block-size 8 cuts packed rows" \
  lm --input "$WORK/all.jsonl" --text-field body --tokenizer "$BPE/gpt2" --packing none --block-size 8 --output "$WORK/x.h5"
expect_failure "too few tokens for one row" "split 'train': its 49 documents hold [0-9]+ tokens, fewer than one row of --block-size 100000" \
  lm --input "$WORK/all.jsonl" --text-field body --tokenizer "$BPE/gpt2" --block-size 100000 --output "$WORK/x.h5"
expect_no_file "no output after a refused option" "$WORK/x.h5"
# Issue 30: a row of one token predicts nothing; an input without usable rows is named; train and eval refuse a
# split without a predicted token (was: training to NaN, perplexity 1.0 over 0 tokens).
expect_failure "--block-size 1" "--block-size 1: expected 2 to [0-9]+ tokens per row \(a row of one token predicts nothing\)" \
  lm --input "$WORK/all.jsonl" --text-field body --tokenizer "$BPE/gpt2" --block-size 1 --output "$WORK/x.h5"
expect_failure "--packing none --max-length 1" "--max-length 1: expected 2 to" \
  lm --input "$WORK/all.jsonl" --text-field body --tokenizer "$BPE/gpt2" --packing none --max-length 1 --output "$WORK/x.h5"
expect_failure "too few tokens: the inputs are named" "inputs: '$WORK/all.jsonl'" \
  lm --input "$WORK/all.jsonl" --text-field body --tokenizer "$BPE/gpt2" --block-size 100000 --output "$WORK/x.h5"
for i in 1 2 3 4 5 6; do echo '{"body": "<|endoftext|>"}'; done >"$WORK/empty-docs.jsonl"  # each document: its EOS alone
expect_success "--packing none of one-token documents" \
  lm --input "$WORK/empty-docs.jsonl" --text-field body --tokenizer "$BPE/gpt2" --packing none --validation-fraction 0.5 --output "$WORK/ones.h5"
echo '{"model_type": "gpt2", "vocab_size": 50257, "n_embd": 8, "n_layer": 1, "n_head": 2, "n_positions": 16}' >"$WORK/gpt2-tiny.json"
expect_failure "train refuses a split without a predicted token" "ones.h5:/train: its 3 row\(s\) hold no predicted token" \
  "$HPCTRAIN" train --model-config "$WORK/gpt2-tiny.json" --data "$WORK/ones.h5" --output "$WORK/run-ones" --threads 1
expect_failure "--max-length 2 rows longer than n_positions name prep lm's option" "prepare the data with .prep lm --packing none --max-length. 16 or less" \
  "$HPCTRAIN" train --model-config "$WORK/gpt2-tiny.json" --data "$WORK/gpt2-none.h5" --output "$WORK/run-long" --threads 1
mkdir -p "$WORK/noeos" && cp "$BPE/gpt2/tokenizer.json" "$WORK/noeos/"
echo '{"bos_token": "<|endoftext|>"}' >"$WORK/noeos/tokenizer_config.json"
expect_failure "a tokenizer without EOS is refused" "noeos: the tokenizer has no EOS token \(tokenizer_config.json's eos_token: absent\)" \
  lm --input "$WORK/all.jsonl" --text-field body --tokenizer "$WORK/noeos" --output "$WORK/x.h5"

# inspect prints the file; a classifier is refused on it before any work (training it: tests/mpi_train/test_causal_lm.sh).
expect_success "inspect --validate" "$HPCTRAIN" inspect "$WORK/gpt2.h5" --validate
grep -q "task        causal-lm" "$WORK/out" && grep -q "labels      none" "$WORK/out" && ok "inspect shows the task" || bad "inspect output"
expect_failure "train refuses a classifier on a causal-lm file" "preset 'tiny-distilbert' is a text classification model, but '$WORK/gpt2.h5' is a causal-lm dataset" \
  "$HPCTRAIN" train --model-config preset:tiny-distilbert --data "$WORK/gpt2.h5" --output "$WORK/run"
[[ ! -e "$WORK/run" ]] && ok "train left no run folder" || bad "train created $WORK/run"
echo '{"model_type": "distilbert", "vocab_size": 2000}' >"$WORK/distilbert.json"
expect_failure "train refuses a classifier config on a causal-lm file" "model_type 'distilbert' is not a causal language model, but '$WORK/gpt2.h5' is a causal-lm dataset" \
  "$HPCTRAIN" train --model-config "$WORK/distilbert.json" --data "$WORK/gpt2.h5" --output "$WORK/run"
expect_failure "eval refuses a model folder that is not there" "no-model" \
  "$HPCTRAIN" eval --model "$WORK/no-model" --data "$WORK/gpt2.h5" --split train

leftovers=$(ls "$WORK" | grep -c '\.prep-\|\.tmp\.' || true)
[[ "$leftovers" == 0 ]] && ok "no token streams, buckets or temporaries left" || bad "temporaries left: $(ls "$WORK")"
finish
