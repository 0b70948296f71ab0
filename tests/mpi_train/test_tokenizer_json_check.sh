# A model folder whose only tokenizer is tokenizer.json (what transformers 5 saves; issue 25, item 7; Note
# [Tokenizer matches the dataset]): its model.vocab is checked against the dataset's vocab_sha256 as vocab.txt
# is. The same tokens train and final/ keeps that tokenizer.json; "the" and "of" swapped are refused on 2
# ranks naming the file, also beside a matching vocab.txt; a folder without a tokenizer says so.
source "$(dirname "$0")/lib.sh"
make_fixture
run_ok "a model to start from (1 step)" "$WORK/base.log" mpi 1 train $(train_args "$WORK/base") --max-steps 1 --batch-size 8

# model_dir NAME [swap]: $WORK/NAME with final/'s config.json and weights, and tokenizer.json made from the fixture's
# vocab.txt (the ids of "the" and "of" swapped with "swap"); no vocab.txt.
model_dir() {
  mkdir -p "$WORK/$1" && cp "$WORK/base/final/config.json" "$WORK/base/final/model.safetensors" "$WORK/$1/"
  "$PY" - "$WORK/tok/vocab.txt" "$WORK/$1/tokenizer.json" "${2:-}" <<'PYEOF'
import json, sys
tokens = open(sys.argv[1]).read().splitlines()
vocab = {t: i for i, t in enumerate(tokens)}
if sys.argv[3] == "swap":
    vocab["the"], vocab["of"] = vocab["of"], vocab["the"]
special = lambda t: {"id": vocab[t], "content": t, "single_word": False, "lstrip": False, "rstrip": False,
                     "normalized": False, "special": True}
tokenizer = {
    "version": "1.0", "truncation": None, "padding": None,
    "added_tokens": [special(t) for t in ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]],
    "normalizer": {"type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": True, "strip_accents": None,
                   "lowercase": True},
    "pre_tokenizer": {"type": "BertPreTokenizer"},
    "post_processor": {"type": "TemplateProcessing",
        "single": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                   {"SpecialToken": {"id": "[SEP]", "type_id": 0}}],
        "pair": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                 {"SpecialToken": {"id": "[SEP]", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}},
                 {"SpecialToken": {"id": "[SEP]", "type_id": 1}}],
        "special_tokens": {t: {"id": t, "ids": [vocab[t]], "tokens": [t]} for t in ["[CLS]", "[SEP]"]}},
    "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": True},
    "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
              "max_input_chars_per_word": 100, "vocab": vocab},
}
json.dump(tokenizer, open(sys.argv[2], "w"), indent=2)
PYEOF
}
# from NAME: the training options with --model $WORK/NAME (no --model-config, no --tokenizer)
from() {
  echo --model "$WORK/$1" --data "$WORK/data.h5" --output "$WORK/out-$1" --threads 1 --device cpu --no-progress \
    --max-steps 1 --batch-size 8
}

model_dir same
run_ok "tokenizer.json with the dataset's vocabulary trains" "$WORK/same.log" mpi 1 train $(from same)
cmp -s "$WORK/same/tokenizer.json" "$WORK/out-same/final/tokenizer.json" && ok "  final/ keeps its tokenizer.json" \
  || bad "  final/tokenizer.json missing or changed"

# refused NAME LABEL: training from $WORK/NAME on 2 ranks fails, naming its tokenizer.json, and writes no final/
refused() {
  local code=0
  timeout 60 "$MPIEXEC" --oversubscribe --bind-to none -np 2 "$HPCTRAIN" train $(from "$1") >"$WORK/$1.log" 2>&1 || code=$?
  if [[ $code -eq 0 ]]; then bad "$2: exit 0"; return; fi
  [[ $code -ne 124 ]] && ok "$2: refused (exit $code, no hang)" || bad "$2: hangs"
  local line="'$WORK/$1/tokenizer.json' is not the vocabulary '$WORK/data.h5' was prepared with"
  # every rank throws this Error (agreed); the first to print it ends the job (MPI_Abort), so one line is sure
  grep -qF -- "error: building the model failed on rank 0: $line" "$WORK/$1.log" && ok "  the error names tokenizer.json" \
    || { bad "  no error naming tokenizer.json"; tail -5 "$WORK/$1.log"; }
  [[ ! -e "$WORK/out-$1/final" ]] && ok "  no final/" || bad "  final/ written"
}
model_dir swapped swap
refused swapped "tokenizer.json with 'the' and 'of' swapped"
model_dir both swap
cp "$WORK/tok/vocab.txt" "$WORK/both/"
refused both "a matching vocab.txt beside a swapped tokenizer.json"

mkdir -p "$WORK/bare" && cp "$WORK/base/final/config.json" "$WORK/base/final/model.safetensors" "$WORK/bare/"
run_ok "a model folder without a tokenizer trains" "$WORK/bare.log" mpi 1 train $(from bare)
grep -q "no tokenizer files in '$WORK/bare' .*the vocabulary cannot be checked" "$WORK/bare.log" && ok "  and says it has no tokenizer" \
  || { bad "  no note about the missing tokenizer"; grep -i token "$WORK/bare.log"; }
finish
