# `prep text` in parallel and in small memory (Note [Prep at corpus scale]): `mpirun -np 2` ≡ one process ≡ a tiny
# --memory-mb (many blocks and bucket files), dataset by dataset, for JSONL and for CSV whose quoted fields span
# lines (the ranks' byte ranges must split at record boundaries outside quotes), and for gzip; --skip-invalid
# counts add up.
source "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
MPIRUN=(timeout 120 mpirun --oversubscribe --bind-to none -np 2)
same() { "$PY" "$(dirname "$0")/prep_same_datasets.py" "$@"; }

# 3000 JSONL rows, 3 labels, lengths vary; two invalid rows for --skip-invalid.
"$PY" - "$WORK" <<'PYEOF'
import json, sys
work = sys.argv[1]
with open(f"{work}/rows.jsonl", "w") as f:
    for i in range(3000):
        words = " ".join(f"word{(i * 7 + k) % 97} and more" for k in range(1 + i % 23))
        f.write(json.dumps({"text": f"row {i}: {words}", "label": ["red", "green", "blue"][i * i % 3]}) + "\n")
        if i in (700, 2400):
            f.write('{"text": "", "label": "red"}\n')
# CSV: every text spans three lines inside quotes, with commas and "" escapes.
with open(f"{work}/rows.csv", "w") as f:
    f.write("label,sentence\n")
    for i in range(2000):
        f.write(f'{i % 4},"first line {i}, with a comma\nsecond ""quoted"" line\nthird line {i * 3}"\n')
PYEOF

prep() { "$HPCTRAIN" prep text --tokenizer "$TOKENIZER" --no-progress --threads 1 "$@"; }
json=(--input "$WORK/rows.jsonl" --validation-fraction 0.25 --seed 3 --skip-invalid)
expect_success "jsonl: one process" prep "${json[@]}" --output "$WORK/one.h5"
grep -q "skipped 2 rows: empty text" "$WORK/out" "$WORK/err" && ok "jsonl: skipped rows counted" || bad "skipped count"
expect_success "jsonl: --memory-mb 2 (many buckets)" prep "${json[@]}" --output "$WORK/small.h5" --memory-mb 2
expect_success "jsonl: mpirun -np 2" "${MPIRUN[@]}" "$HPCTRAIN" prep text --tokenizer "$TOKENIZER" --no-progress --threads 1 \
  "${json[@]}" --output "$WORK/two.h5" --memory-mb 2
grep -q "skipped 2 rows: empty text" "$WORK/out" "$WORK/err" && ok "jsonl -np 2: skipped rows summed over ranks" || bad "skipped count -np 2"
same "$WORK/one.h5" "$WORK/small.h5" && ok "jsonl: small memory ≡ one process" || bad "jsonl: small memory differs"
same "$WORK/one.h5" "$WORK/two.h5" && ok "jsonl: 2 ranks ≡ one process" || bad "jsonl: 2 ranks differ"

csv=(--input "$WORK/rows.csv" --text-field sentence --validation-fraction 0.1 --max-length 24)
expect_success "csv: one process" prep "${csv[@]}" --output "$WORK/csv1.h5"
expect_success "csv: mpirun -np 2" "${MPIRUN[@]}" "$HPCTRAIN" prep text --tokenizer "$TOKENIZER" --no-progress --threads 1 \
  "${csv[@]}" --output "$WORK/csv2.h5" --memory-mb 2
same "$WORK/csv1.h5" "$WORK/csv2.h5" && ok "csv with multi-line quoted fields: 2 ranks ≡ one process" || bad "csv: 2 ranks differ"
rows=$("$PY" -c "import h5py,sys; f=h5py.File(sys.argv[1]); print(len(f['train/labels']) + len(f['validation/labels']))" "$WORK/csv2.h5")
[[ "$rows" == 2000 ]] && ok "csv -np 2: every row once" || bad "csv -np 2: $rows rows"
# gzip (Note [Splitting a gzip input]): rank 0 decompresses to a temporary that both ranks split; the same file
# as the plain input in one process; a bad row in rank 1's part names the .gz file and its line.
gzip -k "$WORK/rows.jsonl"
expect_success "jsonl.gz: mpirun -np 2" "${MPIRUN[@]}" "$HPCTRAIN" prep text --tokenizer "$TOKENIZER" --no-progress --threads 1 \
  --input "$WORK/rows.jsonl.gz" "${json[@]:2}" --output "$WORK/gz2.h5" --memory-mb 2
same "$WORK/one.h5" "$WORK/gz2.h5" && ok "jsonl.gz: 2 ranks ≡ the plain input in one process" || bad "jsonl.gz: 2 ranks differ"
grep -v '"text": ""' "$WORK/rows.jsonl" | sed '2600s/.*/{"text": "cut off/' | gzip >"$WORK/bad.jsonl.gz"
expect_failure "jsonl.gz: a bad row on rank 1 fails the job" 'failed on rank 1: .*bad\.jsonl\.gz: line 2600 .*malformed JSON' \
  "${MPIRUN[@]}" "$HPCTRAIN" prep text --tokenizer "$TOKENIZER" --no-progress --threads 1 --input "$WORK/bad.jsonl.gz" \
  --output "$WORK/bad.h5"
expect_no_file "jsonl.gz: no output after the bad row" "$WORK/bad.h5"

leftovers=$(ls "$WORK" | grep -c '\.prep-' || true)
[[ "$leftovers" == 0 ]] && ok "no bucket files or decompressed temporaries left" || bad "temporaries left: $(ls "$WORK")"
finish
