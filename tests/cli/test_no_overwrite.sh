# No command overwrites one of its inputs (same inode: other spellings, symlinks and hard links too), an existing
# output is replaced only with --overwrite, and a failed write leaves no temporary (issue 12, item 4).
source "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
GOLDEN="$REPO/tests/models/golden"
MODEL="$GOLDEN/tiny-distilbert-f32"
"$PY" "$(dirname "$0")/make_golden_dataset.py" "$GOLDEN/golden.json" tiny-distilbert-f32 "$WORK/data.h5" "$WORK/expected.json"
cp "$WORK/data.h5" "$WORK/data.orig"
predict() { "$HPCTRAIN" predict --model "$MODEL" --data "$WORK/data.h5" --split validation --threads 1 "$@"; }
same_as() {  # same_as NAME FILE ORIGINAL: FILE is byte-identical to ORIGINAL
  if cmp -s "$2" "$3"; then ok "$1"; else bad "$1: '$2' changed"; fi
}

# --- predict ---
expect_failure "predict --output = --data is refused" "is the input '.*data.h5'" predict --output "$WORK/data.h5"
same_as "  --data unchanged" "$WORK/data.h5" "$WORK/data.orig"
expect_failure "  even with --overwrite" "is the input" predict --output "$WORK/data.h5" --overwrite
same_as "  --data unchanged" "$WORK/data.h5" "$WORK/data.orig"
expect_failure "  another spelling of --data" "is the input" predict --output "$WORK/./sub/../data.h5" --overwrite
ln -s "$WORK/data.h5" "$WORK/link.h5"
expect_failure "  a symlink to --data" "is the input" predict --output "$WORK/link.h5" --overwrite
ln "$WORK/data.h5" "$WORK/hard.h5"
expect_failure "  a hard link to --data" "is the input" predict --output "$WORK/hard.h5" --overwrite
same_as "  --data unchanged" "$WORK/data.h5" "$WORK/data.orig"
expect_failure "predict onto a model file is refused" "is the input" predict --output "$MODEL/config.json" --overwrite

echo "keep me" >"$WORK/old.jsonl"
cp "$WORK/old.jsonl" "$WORK/old.orig"
expect_failure "predict onto an existing file without --overwrite" "exists; pass --overwrite" predict --output "$WORK/old.jsonl"
same_as "  the existing file unchanged" "$WORK/old.jsonl" "$WORK/old.orig"
expect_success "predict onto an existing file with --overwrite" predict --output "$WORK/old.jsonl" --overwrite
[[ $(wc -l <"$WORK/old.jsonl") -gt 1 ]] && ok "  replaced by the predictions" || bad "  not replaced"

mkdir -p "$WORK/adir/inner"
expect_failure "predict --output FOLDER is refused" "is a folder" predict --output "$WORK/adir"
expect_no_file "  no FOLDER.tmp left" "$WORK/adir.tmp"
touch "$WORK/plainfile"
expect_failure "predict into a folder that cannot be made" "plainfile" predict --output "$WORK/plainfile/preds.jsonl"
[[ ! -e "$WORK/plainfile/preds.jsonl.tmp" ]] && ok "  no temporary left" || bad "  temporary left"
leftovers=$(find "$WORK" -name '*.tmp*' | grep -v data.orig || true)
[[ -z "$leftovers" ]] && ok "no temporaries anywhere" || bad "temporaries left: $leftovers"

# --- prep text ---
printf '{"text": "a good day", "label": "pos"}\n{"text": "a bad day", "label": "neg"}\n{"text": "fine", "label": "pos"}\n' \
  >"$WORK/rows.jsonl"
cp "$WORK/rows.jsonl" "$WORK/rows.orig"
prep() { "$HPCTRAIN" prep text --text-field text --label-field label --tokenizer "$TOKENIZER" --max-length 16 --no-progress "$@"; }
expect_failure "prep --output = --input is refused, even with --overwrite" "is the input" \
  prep --input "$WORK/rows.jsonl" --output "$WORK/rows.jsonl" --overwrite
same_as "  --input unchanged" "$WORK/rows.jsonl" "$WORK/rows.orig"
ln -s "$WORK/rows.jsonl" "$WORK/rows-link.h5"
expect_failure "  through a symlink" "is the input" prep --input "$WORK/rows.jsonl" --output "$WORK/rows-link.h5" --overwrite
ln "$WORK/rows.jsonl" "$WORK/rows-hard.h5"
expect_failure "  through a hard link" "is the input" prep --input "$WORK/rows.jsonl" --output "$WORK/rows-hard.h5" --overwrite
same_as "  --input unchanged" "$WORK/rows.jsonl" "$WORK/rows.orig"
expect_failure "  --output = --validation-input" "is the input" \
  prep --input "$WORK/rows.jsonl" --validation-input "$WORK/rows.orig" --output "$WORK/rows.orig" --overwrite
expect_failure "  --output = the tokenizer's vocab.txt" "is the input" \
  prep --input "$WORK/rows.jsonl" --output "$TOKENIZER/vocab.txt" --overwrite
expect_success "prep to a new file" prep --input "$WORK/rows.jsonl" --output "$WORK/new.h5"
expect_failure "prep onto an existing output without --overwrite" "exists; pass --overwrite" \
  prep --input "$WORK/rows.jsonl" --output "$WORK/new.h5"
expect_success "  with --overwrite" prep --input "$WORK/rows.jsonl" --output "$WORK/new.h5" --overwrite

# --- prep images ---
"$PY" - "$WORK/mnist" <<'PYEOF'
import os, struct, sys
os.makedirs(sys.argv[1], exist_ok=True)
def write(name, magic, dims, payload):
    with open(os.path.join(sys.argv[1], name), "wb") as f:
        f.write(struct.pack(">I", magic) + b"".join(struct.pack(">I", d) for d in dims) + payload)
for split, n in (("train", 4), ("t10k", 2)):
    write(f"{split}-images-idx3-ubyte", 0x803, (n, 2, 2), bytes(range(4 * n)))
    write(f"{split}-labels-idx1-ubyte", 0x801, (n,), bytes(i % 2 for i in range(n)))
PYEOF
cp "$WORK/mnist/train-images-idx3-ubyte" "$WORK/images.orig"
expect_failure "prep images --output = an input file" "is the input" "$HPCTRAIN" prep images --input-dir "$WORK/mnist" \
  --output "$WORK/mnist/train-images-idx3-ubyte" --overwrite
same_as "  the images unchanged" "$WORK/mnist/train-images-idx3-ubyte" "$WORK/images.orig"
expect_failure "prep images --output = --train-labels" "is the input" "$HPCTRAIN" prep images \
  --train-images "$WORK/mnist/train-images-idx3-ubyte" --train-labels "$WORK/mnist/train-labels-idx1-ubyte" \
  --output "$WORK/mnist/../mnist/train-labels-idx1-ubyte" --overwrite
finish
