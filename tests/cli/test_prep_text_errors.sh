# Bad input to `hpctrain prep text`: non-zero exit, a message naming file, line and reason, no output file.
source "$(dirname "$0")/lib.sh"

prep() { "$HPCTRAIN" prep text --tokenizer "$TOKENIZER" --no-progress --max-length 32 "$@"; }
out="$WORK/out.h5"

printf '%s\n' '{"text": "good row", "label": "a"}' '{"label": "b"}' >"$WORK/missing.jsonl"
expect_failure "missing field" 'missing\.jsonl: line 2 .*missing field .text.' prep --input "$WORK/missing.jsonl" --output "$out"
expect_no_file "missing field leaves no file" "$out"

printf '%s\n' '{"text": "good row", "label": "a"}' '{"text": "  ", "label": "b"}' >"$WORK/empty.jsonl"
expect_failure "empty text" 'empty\.jsonl: line 2 .*empty text' prep --input "$WORK/empty.jsonl" --output "$out"
expect_no_file "empty text leaves no file" "$out"

printf '%s\n' '{"text": "good row", "label": "a"}' '{"text": "oops, "label": "b"}' >"$WORK/malformed.jsonl"
expect_failure "malformed JSON" 'malformed\.jsonl: line 2 .*(JSON|json)' prep --input "$WORK/malformed.jsonl" --output "$out"
expect_no_file "malformed JSON leaves no file" "$out"

printf 'text,label\n"fine",a\n"unterminated,b\n' >"$WORK/quotes.csv"
expect_failure "malformed CSV quoting" 'quotes\.csv: line 3 .*(quote|quoting)' prep --input "$WORK/quotes.csv" --output "$out"
expect_no_file "malformed CSV leaves no file" "$out"

printf '%s\n' '{"text": "one", "label": "a"}' '{"text": "two", "label": "c"}' >"$WORK/labels.jsonl"
expect_failure "label not in --labels" "labels\.jsonl: line 2 .*label 'c' is not in --labels" prep --input "$WORK/labels.jsonl" --labels a,b --output "$out"
expect_no_file "unknown label leaves no file" "$out"

: >"$WORK/nothing.jsonl"
expect_failure "an empty input names the file and says it has no rows" \
  "the input has no rows to prepare: '$WORK/nothing\.jsonl' \(0 rows\)" prep --input "$WORK/nothing.jsonl" --output "$out"
expect_no_file "an empty input leaves no file" "$out"
printf 'text,label\n' >"$WORK/header.csv"
expect_failure "a header without rows, with --labels, names the file" "header\.csv' \(0 rows\)" \
  prep --input "$WORK/header.csv" --labels a,b --output "$out"
printf '%s\n' '{"text": " ", "label": "a"}' '{"label": "b"}' >"$WORK/all_bad.jsonl"
expect_failure "every row skipped: no labels, naming the file" \
  "no labels: every row of '$WORK/all_bad\.jsonl' \(2 rows\) was skipped as invalid" \
  prep --input "$WORK/all_bad.jsonl" --skip-invalid --output "$out"

expect_failure "missing input file" "nope\.jsonl' does not exist" prep --input "$WORK/nope.jsonl" --output "$out"
expect_failure "unknown extension" 'data\.xml' prep --input "$WORK/data.xml" --output "$out"
expect_failure "missing tokenizer" 'vocab\.txt|tokenizer\.json' "$HPCTRAIN" prep text --input "$WORK/labels.jsonl" --tokenizer "$WORK" --output "$out"
expect_failure "missing required option" 'output' "$HPCTRAIN" prep text --input "$WORK/labels.jsonl" --tokenizer "$TOKENIZER"

# --skip-invalid: bad rows are skipped and counted by reason; the file is written.
cat "$WORK/missing.jsonl" "$WORK/empty.jsonl" "$WORK/malformed.jsonl" >"$WORK/mixed.jsonl"
expect_success "skip-invalid writes the file" prep --input "$WORK/mixed.jsonl" --output "$out" --skip-invalid
if grep -q "skipped 1 rows: missing field" "$WORK/err" && grep -q "skipped 1 rows: empty text" "$WORK/err" &&
   grep -q "skipped 1 rows: malformed row" "$WORK/err"; then ok "skip-invalid counts by reason"; else bad "skip-invalid counts"; cat "$WORK/err"; fi
[[ -f "$out" ]] && ok "skip-invalid output exists" || bad "skip-invalid output missing"

# An existing output is never replaced without --overwrite, and a failed run keeps it intact.
before=$(sha256sum "$out")
expect_failure "refuses to overwrite" 'exists.*--overwrite' prep --input "$WORK/labels.jsonl" --output "$out"
expect_failure "failed run with --overwrite" 'line 2' prep --input "$WORK/missing.jsonl" --output "$out" --overwrite
[[ "$(sha256sum "$out")" == "$before" ]] && ok "existing file untouched by failed runs" || bad "existing file changed"
expect_success "--overwrite replaces" prep --input "$WORK/labels.jsonl" --output "$out" --overwrite

finish
