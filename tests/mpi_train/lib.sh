# Helpers for the mpirun training tests: `bash test_x.sh HPCTRAIN_BINARY REPO_ROOT MPIEXEC`.
# Builds a tiny fixture (vocabulary, JSONL, HDF5 via `hpctrain prep text`, DistilBERT config.json) in a
# scratch folder, and offers ok/bad/finish bookkeeping like tests/cli/lib.sh.
set -uo pipefail
HPCTRAIN=${1:?hpctrain binary}
REPO=${2:?repository root}
MPIEXEC=${3:-mpirun}
HERE="$REPO/tests/mpi_train"
PY=${HPCTRAIN_TEST_PYTHON:-/usr/bin/python3}  # needs numpy
WORK=$(mktemp -d /tmp/hpctrain-train.XXXXXX)
# kill_runs: ends every launcher and rank of this test's runs (their command lines name $WORK), so that a
# run a test left in the background never outlives it (it would burn the cores of every later test).
kill_runs() { pkill -KILL -f -- "--model-config $WORK/" 2>/dev/null || true; }
# rank_pid NAME R: the pid of rank R of the run writing to $WORK/NAME (waits up to 30 s for it).
rank_pid() {
  local pid
  for _ in $(seq 1 300); do
    for pid in $(pgrep -f "$HPCTRAIN train .*--output $WORK/$1 "); do
      if tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$2"; then echo "$pid"; return; fi
    done
    sleep 0.1
  done
}

trap 'kill_runs; [[ -n "${HPCTRAIN_KEEP_WORK:-}" ]] || rm -rf "$WORK"' EXIT  # HPCTRAIN_KEEP_WORK=1 keeps it
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
passed=0
failed=0

ok() { echo "ok: $1"; passed=$((passed + 1)); }
bad() { echo "FAILED: $1"; failed=$((failed + 1)); }
finish() {
  echo "$passed passed, $failed failed"
  [[ $failed -eq 0 ]]
}

# mpi N ARGS...: hpctrain under mpirun -np N (N = 1 runs under mpirun too, as users do).
mpi() {
  local np=$1; shift
  "$MPIEXEC" --oversubscribe --bind-to none -np "$np" "$HPCTRAIN" "$@"
}

# run_ok NAME LOG CMD...: the command exits 0 (its output goes to LOG, shown on failure).
run_ok() {
  local name=$1 log=$2; shift 2
  if "$@" >"$log" 2>&1; then ok "$name"; else bad "$name (exit $?)"; tail -30 "$log"; fi
}

# make_fixture [DROPOUT]: $WORK/tok (vocab), $WORK/data.h5 (100 rows, 3 labels: TRAIN_N = 79 train and VAL_N = 21
# validation examples after the stratified split), $WORK/config.json.
make_fixture() {
  local dropout=${1:-0.0}
  mkdir -p "$WORK/tok"
  { printf '[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n'
    for w in red green blue apple pear plum sky sea leaf fire stone wood cloud rain sun moon star tree rock sand \
             the a of and is was very quite small big old new; do echo "$w"; done; } >"$WORK/tok/vocab.txt"
  echo '{"do_lower_case": true, "model_max_length": 32}' >"$WORK/tok/tokenizer_config.json"
  "$PY" - "$WORK/rows.jsonl" <<'PYEOF'
import json, random, sys
random.seed(5)
colors = {"red": ["apple", "fire", "stone"], "green": ["leaf", "tree", "pear"], "blue": ["sky", "sea", "moon"]}
filler = ["the", "a", "of", "and", "is", "was", "very", "quite", "small", "big", "old", "new", "cloud", "rain", "sand"]
with open(sys.argv[1], "w") as out:
    for i in range(100):
        label = ["red", "green", "blue"][i % 3]
        words = random.sample(filler, random.randint(2, 8)) + [random.choice(colors[label])]
        random.shuffle(words)
        out.write(json.dumps({"text": " ".join(words), "label": label}) + "\n")
PYEOF
  "$HPCTRAIN" prep text --input "$WORK/rows.jsonl" --text-field text --label-field label --tokenizer "$WORK/tok" \
    --max-length 16 --validation-fraction 0.2 --seed 3 --compression none --no-progress --output "$WORK/data.h5" \
    >"$WORK/prep.log" 2>&1 || { echo "fixture: prep failed"; cat "$WORK/prep.log"; exit 1; }
  read -r TRAIN_N VAL_N < <("$PY" -c "import h5py, sys; f = h5py.File(sys.argv[1], 'r'); \
print(f['train/labels'].shape[0], f['validation/labels'].shape[0])" "$WORK/data.h5")
  cat >"$WORK/config.json" <<JSON
{"model_type": "distilbert", "vocab_size": 40, "dim": 32, "n_layers": 2, "n_heads": 2, "hidden_dim": 64,
 "max_position_embeddings": 32, "dropout": $dropout, "attention_dropout": $dropout, "seq_classif_dropout": $dropout}
JSON
}

# make_lm_fixture: $WORK/docs.jsonl (98 documents of many lengths: tests/prep/golden/lm_documents.json and their
# reversals), $WORK/packed.h5 (`prep lm` with the golden GPT-2 tokenizer $BPE: rows of 16 tokens, 20 % validation)
# and tiny causal LMs $WORK/gpt2.json and $WORK/llama.json (vocabulary 1500, dropout off; Llama with grouped-query
# attention and an untied head).
BPE="$REPO/tests/tokenize/golden/bpe/gpt2"
make_lm_fixture() {
  "$PY" - "$WORK/docs.jsonl" "$REPO/tests/prep/golden/lm_documents.json" <<'PYEOF'
import json, sys
docs = json.load(open(sys.argv[2]))["documents"]
with open(sys.argv[1], "w") as f:
    for text in docs + [d[::-1] for d in docs]:  # 98 documents of many lengths
        f.write(json.dumps({"text": text}, ensure_ascii=False) + "\n")
PYEOF
  "$HPCTRAIN" prep lm --no-progress --input "$WORK/docs.jsonl" --text-field text --tokenizer "$BPE" \
    --validation-fraction 0.2 --seed 4 --block-size 16 --output "$WORK/packed.h5" >"$WORK/prep-lm.log" 2>&1 \
    || { echo "fixture: prep lm failed"; cat "$WORK/prep-lm.log"; exit 1; }
  cat >"$WORK/gpt2.json" <<'JSON'
{"model_type": "gpt2", "vocab_size": 1500, "n_embd": 32, "n_layer": 2, "n_head": 2, "n_positions": 64,
 "resid_pdrop": 0.0, "embd_pdrop": 0.0, "attn_pdrop": 0.0, "eos_token_id": 0, "bos_token_id": 0}
JSON
  cat >"$WORK/llama.json" <<'JSON'
{"model_type": "llama", "vocab_size": 1500, "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
 "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 64, "tie_word_embeddings": false}
JSON
}

# train_args OUTPUT: the common options of a quick run on the fixture (1 thread per rank, no progress bar).
train_args() {
  echo --model-config "$WORK/config.json" --data "$WORK/data.h5" --tokenizer "$WORK/tok" --output "$1" \
    --threads 1 --device "${HPCTRAIN_TEST_DEVICE:-cpu}" --no-progress --logging-steps 1 --lr "${LR:-1e-3}"
}

# compare A.safetensors B.safetensors TOLERANCE: max relative difference of every tensor <= TOLERANCE.
compare() { "$PY" "$HERE/compare_weights.py" "$@"; }

# check_exact_resume LABEL OUT TOLERANCE [TRAIN ARGS...]: on 2 ranks, 14 steps straight (OUT-whole) equal
# 7 steps then --resume auto to 14 (OUT-pieces; checkpoints every 4 steps, mid-epoch stop): final weights,
# checkpoint-14's optimizer state and the loss history agree within TOLERANCE (0: bitwise). The extra
# arguments choose the optimizer (--optim ...); Note [Optimizer checkpoints].
check_exact_resume() {
  local label=$1 out=$2 tolerance=$3; shift 3
  local exact=(--lr-scheduler constant --warmup-steps 3 --save-steps 4 --batch-size 4 "$@")
  run_ok "$label: uninterrupted, 14 steps" "$out-whole.log" mpi 2 train $(train_args "$out-whole") "${exact[@]}" --max-steps 14
  run_ok "$label: first 7 steps" "$out-a.log" mpi 2 train $(train_args "$out-pieces") "${exact[@]}" --max-steps 7
  run_ok "$label: resume auto to 14" "$out-b.log" mpi 2 train $(train_args "$out-pieces") "${exact[@]}" --max-steps 14 \
    --resume auto
  grep -q "resuming at step 7" "$out-b.log" && ok "$label: resumed from checkpoint-7" || { bad "$label: resume point"; head -20 "$out-b.log"; }
  compare "$out-whole/final/model.safetensors" "$out-pieces/final/model.safetensors" "$tolerance" \
    && ok "$label: resumed weights == uninterrupted weights" || bad "$label: resumed weights differ"
  compare "$out-whole/checkpoint-14/optimizer.safetensors" "$out-pieces/checkpoint-14/optimizer.safetensors" "$tolerance" \
    && ok "$label: optimizer states equal" || bad "$label: optimizer states differ"
  "$PY" - "$out-whole/metrics.jsonl" "$out-pieces/metrics.jsonl" "$tolerance" <<'PYEOF' && ok "$label: loss history equal" || bad "$label: loss history"
import json, sys
def curve(path):
    return {e["step"]: e["loss"] for e in map(json.loads, open(path)) if "loss" in e}
a, b, tolerance = curve(sys.argv[1]), curve(sys.argv[2]), max(float(sys.argv[3]), 1e-12)
print(sorted(a.items())); print(sorted(b.items()))
sys.exit(0 if sorted(a) == list(range(1, 15)) and sorted(a) == sorted(b) and all(abs(a[s] - b[s]) <= tolerance for s in a) else 1)
PYEOF
}
