# `hpctrain prep lm --packing bfd | bfd_split` end to end: rows of whole documents (or pieces) checked with h5py
# against ids made by Hugging Face tokenizers (tests/prep/golden/lm_documents.json); `mpirun -np 2` and a tiny
# --memory-mb ≡ one process; inspect reports the fill; the hostile options are named (Note [Best-fit-decreasing rows]).
source "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
MPIRUN=(timeout 120 mpirun --oversubscribe --bind-to none -np 2)
GOLDEN="$REPO/tests/prep/golden/lm_documents.json"
BPE="$REPO/tests/tokenize/golden/bpe"
check() { "$PY" "$(dirname "$0")/check_lm_h5.py" "$@"; }
same() { "$PY" "$(dirname "$0")/prep_same_datasets.py" "$@"; }
"$PY" - "$WORK" "$GOLDEN" <<'PYEOF'
import json, sys
work, golden = sys.argv[1], json.load(open(sys.argv[2]))
with open(f"{work}/all.jsonl", "w") as f:
    for text in golden["documents"]:
        f.write(json.dumps({"body": text}, ensure_ascii=False) + "\n")
PYEOF
lm() { "$HPCTRAIN" prep lm --no-progress --threads 2 "$@"; }
docs=(--input "$WORK/all.jsonl" --text-field body)

# gpt2 bfd (documents longer than 24 tokens are cut: reported); llama3 bfd_split in one process and on 2 ranks.
expect_success "gpt2: --packing bfd --max-length 24" lm "${docs[@]}" --tokenizer "$BPE/gpt2" --packing bfd \
  --max-length 24 --validation-fraction 0.2 --output "$WORK/gpt2-bfd.h5"
check "$WORK/gpt2-bfd.h5" "$GOLDEN" gpt2 bfd 24 && ok "gpt2: bfd rows = the reference documents" || bad "gpt2: bfd rows"
grep -q "documents were longer than a row and cut to their first 24 tokens" "$WORK/out" "$WORK/err" \
  && ok "bfd: cut documents reported" || bad "bfd: cut documents not reported"
grep -q "fill [0-9.]* % (tokens / (rows x 24))" "$WORK/out" "$WORK/err" && ok "prep reports the fill" || bad "prep fill"
args=("${docs[@]}" --tokenizer "$BPE/llama3" --packing bfd_split --max-length 16 --validation-fraction 0.25 --seed 9)
expect_success "llama3 bfd_split: one process" lm "${args[@]}" --output "$WORK/one.h5"
check "$WORK/one.h5" "$GOLDEN" llama3 bfd_split 16 && ok "llama3: bfd_split rows = the reference documents in pieces" \
  || bad "llama3: bfd_split rows"
expect_success "llama3 bfd_split: mpirun -np 2 --memory-mb 2" "${MPIRUN[@]}" "$HPCTRAIN" prep lm --no-progress \
  --threads 1 "${args[@]}" --output "$WORK/two.h5" --memory-mb 2
same "$WORK/one.h5" "$WORK/two.h5" && ok "bfd_split: 2 ranks ≡ one process" || bad "bfd_split: 2 ranks differ"

expect_success "inspect --validate" "$HPCTRAIN" inspect "$WORK/one.h5" --validate
grep -q "fill: [0-9.]* % (tokens / (rows x max_length 16))" "$WORK/out" && grep -q "boundaries kept" "$WORK/out" \
  && ok "inspect shows the fill" || bad "inspect output"

for length in 0 1; do
  expect_failure "--max-length $length is refused" "--max-length $length: expected 2 to [0-9]+ tokens per row" \
    lm "${docs[@]}" --tokenizer "$BPE/gpt2" --packing bfd --max-length $length --output "$WORK/x.h5"
done
expect_failure "--block-size with bfd" "--block-size 8 cuts packed rows \(--packing wrapped\), but --packing bfd" \
  lm "${docs[@]}" --tokenizer "$BPE/gpt2" --packing bfd --block-size 8 --output "$WORK/x.h5"
expect_failure "an unknown --packing" "--packing 'best': expected wrapped \(or group\), bfd, bfd_split or none" \
  lm "${docs[@]}" --tokenizer "$BPE/gpt2" --packing best --output "$WORK/x.h5"
echo '{"other": "no text"}' >"$WORK/empty.jsonl"
expect_failure "an empty validation split" "split 'validation' has no documents" \
  lm "${docs[@]}" --tokenizer "$BPE/gpt2" --packing bfd --validation-input "$WORK/empty.jsonl" --skip-invalid --output "$WORK/x.h5"
expect_no_file "no output after a refused option" "$WORK/x.h5"
expect_success "--packing wrapped is group" lm "${docs[@]}" --tokenizer "$BPE/gpt2" --packing wrapped --block-size 16 \
  --output "$WORK/wrapped.h5"
check "$WORK/wrapped.h5" "$GOLDEN" gpt2 group 16 && ok "wrapped rows = the reference ids cut in 16s" || bad "wrapped rows"
finish
