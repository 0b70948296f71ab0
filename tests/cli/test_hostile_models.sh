#!/usr/bin/env bash
# Models checked before use: absurd sizes refused from config.json alone (fast, nothing allocated), the one
# model <-> dataset check in eval/predict (vocab, positions, model kind), and NaN/Inf weights or logits.
source "$2/tests/cli/hostile_lib.sh" "$@"
LABELS='"id2label": {"0": "blue", "1": "green", "2": "red"}'

# model_dir NAME JSON: a folder holding only config.json.
model_dir() { mkdir -p "$WORK/$1"; echo "$2" >"$WORK/$1/config.json"; echo "$WORK/$1"; }
# elapsed_ms CMD...: runs CMD (output to $WORK/out, $WORK/err) and prints its wall time in milliseconds.
elapsed_ms() {
  local start end
  start=$(date +%s%N)
  "$@" >"$WORK/out" 2>"$WORK/err"
  end=$(date +%s%N)
  echo $(((end - start) / 1000000))
}

# output_of COMMAND: predict's --output argument (eval has none).
output_of() { [[ $1 == predict ]] && echo --output "$WORK/p.jsonl"; }

# ---- absurd sizes (Note [Size before building]) ----
# Refused within twice the time (plus 1 s) of a config refused for its model_type alone (the start-up time of the
# binary, which loads LibTorch, is most of both); the old code tried to allocate for seconds, then died.
BOGUS=$(model_dir bogus '{"model_type": "bogus"}')
baseline=$(elapsed_ms "$HPCTRAIN" inspect "$BOGUS")
HUGE=$(model_dir huge "{\"model_type\": \"distilbert\", \"dim\": 1000000000, \"n_heads\": 8, \"vocab_size\": 40,
  \"max_position_embeddings\": 32, $LABELS}")
ms=$(elapsed_ms "$HPCTRAIN" inspect "$HUGE")
if grep -q "$HUGE/config.json: .*dim 1000000000.*overflows int64" "$WORK/err" && ((ms < 2 * baseline + 1000)); then
  ok "inspect dim 10^9: refused in ${ms} ms (baseline ${baseline} ms)"; else bad "inspect dim 10^9 (${ms} ms, baseline ${baseline} ms)"; cat "$WORK/err"; fi
baseline=$(elapsed_ms "$HPCTRAIN" train $(with_file "$WORK/config.json" "$BOGUS/config.json" train_args "$WORK/run-bogus"))
ms=$(elapsed_ms "$HPCTRAIN" train $(with_file "$WORK/config.json" "$HUGE/config.json" train_args "$WORK/run-huge"))
if grep -q "$HUGE/config.json: .*dim 1000000000.*overflows int64" "$WORK/err" && ((ms < 2 * baseline + 1000)); then
  ok "train --model-config dim 10^9: refused in ${ms} ms (baseline ${baseline} ms)"; else bad "train dim 10^9 (${ms} ms, baseline ${baseline} ms)"; cat "$WORK/err"; fi
# With one layer the count fits int64 but its bytes do not: the message still names config.json and the field.
ONE=$(model_dir one-layer "{\"model_type\": \"distilbert\", \"dim\": 1000000000, \"n_heads\": 8, \"n_layers\": 1, \"hidden_dim\": 4,
  \"vocab_size\": 40, \"max_position_embeddings\": 32, $LABELS}")
BYTES="$ONE/config.json: the parameter bytes overflow int64 \([0-9]+ parameters x 4 bytes\); largest: n_layers 1 x 4 attention projections \(dim 1000000000 x dim\)"
expect_failure "inspect dim 10^9, 1 layer: the bytes overflow, naming config.json and dim" "$BYTES" "$HPCTRAIN" inspect "$ONE"
expect_failure "eval dim 10^9, 1 layer: the same" "$BYTES" "$HPCTRAIN" eval --model "$ONE" --data "$WORK/data.h5" --threads 1
expect_failure "train --model-config dim 10^9, 1 layer: the same" "$BYTES" \
  "$HPCTRAIN" train $(with_file "$WORK/config.json" "$ONE/config.json" train_args "$WORK/run-one")
TERA=$(model_dir tera "{\"model_type\": \"distilbert\", \"dim\": 1000000, \"n_heads\": 2, \"n_layers\": 1, \"hidden_dim\": 64,
  \"vocab_size\": 40, \"max_position_embeddings\": 32, $LABELS}")
expect_failure "eval dim 10^6: bytes needed vs available" \
  "$TERA/config.json: the model has [0-9]+ parameters; largest: .*: building the model needs .* bytes\) \(1 fp32 copy\) but .* are available \((MemAvailable|the cgroup)" \
  "$HPCTRAIN" eval --model "$TERA" --data "$WORK/data.h5" --threads 1
VOCAB=$(model_dir vocab "{\"model_type\": \"distilbert\", \"vocab_size\": 1000000000000, $LABELS}")
expect_failure "train vocab 10^12: refused with the field" \
  "$VOCAB/config.json: the model has [0-9]+ parameters; largest: vocab_size 1000000000000 x dim 768 .* training \(weights, gradients, adamw_torch state\) needs .* \(2 fp32 copies \+ .* of optimizer state\)" \
  "$HPCTRAIN" train $(with_file "$WORK/config.json" "$VOCAB/config.json" train_args "$WORK/run-vocab")
echo "{\"model_type\": \"distilbert\", \"vocab_size\": 40, \"dim\": 1024, \"n_heads\": 8, \"n_layers\": 2, \"hidden_dim\": 4096,
  \"max_position_embeddings\": 32}" >"$WORK/big.json"
expect_success "train a big-but-fine config (25 M parameters)" \
  "$HPCTRAIN" train $(with_file "$WORK/config.json" "$WORK/big.json" train_args "$WORK/run-big") --max-steps 1 --batch-size 2

# ---- the address-space limit (`ulimit -v`, RLIMIT_AS) counts beside MemAvailable and the cgroup limit ----
# 400,000 layers of dim 16: 3.6 GB of parameters, far under the machine's free memory but over `ulimit -v 3000000`
# (3.07 GB, less what is mapped at start). Refused from config.json within seconds, naming the limit, by an error
# (exit 1), not a signal; the old code built modules for half a minute, then died of SIGSEGV or std::bad_alloc.
# Not under ASan (scripts/sanitize.sh): its shadow memory is terabytes of address space, no `ulimit -v` admits it.
DEEP=$(model_dir deep "{\"model_type\": \"distilbert\", \"dim\": 16, \"hidden_dim\": 32, \"n_heads\": 2, \"n_layers\": 400000,
  \"vocab_size\": 40, \"max_position_embeddings\": 32, $LABELS}")
LIMIT="the address-space limit RLIMIT_AS \\(ulimit -v\\) [0-9.]+ GiB \\(3072000000 bytes\\) minus VmSize"
# limited CMD...: CMD under `ulimit -v 3000000` (kB).
limited() { (ulimit -v 3000000 && exec "$@"); }
for command in inspect eval; do
  [[ -n ${HPCTRAIN_SANITIZED:-} ]] && break
  if [[ $command == inspect ]]; then args=("$DEEP"); base=("$BOGUS"); else
    args=(--model "$DEEP" --data "$WORK/data.h5" --threads 1); base=(--model "$BOGUS" --data "$WORK/data.h5" --threads 1); fi
  baseline=$(elapsed_ms limited "$HPCTRAIN" $command "${base[@]}")
  start=$(date +%s%N)
  limited "$HPCTRAIN" $command "${args[@]}" >"$WORK/out" 2>"$WORK/err"
  rc=$? ms=$((($(date +%s%N) - start) / 1000000))
  if ((rc == 1 && ms < 2 * baseline + 2000)) &&
    grep -Eq "$DEEP/config.json: the model has [0-9]+ parameters; largest: n_layers 400000 .* but .* are available \\($LIMIT" "$WORK/err"; then
    ok "$command of 400,000 layers under ulimit -v: refused naming RLIMIT_AS in ${ms} ms (baseline ${baseline} ms)"
  else bad "$command of 400,000 layers under ulimit -v: exit $rc in ${ms} ms (baseline ${baseline} ms)"; cat "$WORK/err"; fi
done
# An allocation that fails past the size check (the model is small, its model.safetensors holds an extra tensor,
# sparse on disk) is an error naming the folder and the limit, not a bare std::bad_alloc or LibTorch's trace.
# Two sizes, two places it fails: 1.2 GB maps but the tensor's copy fails (LibTorch 1.13's smaller VmSize; with
# LibTorch 2's larger one the map itself may fail), and 3.2 GB cannot even be mapped under the 2.9 GiB limit
# (mmap: ENOMEM) with either LibTorch.
pad_weights() {
  cp -r "$MODEL" "$1"
  "$PY" - "$1/model.safetensors" "$2" <<'PYEOF'
import json, struct, sys
path, extra = sys.argv[1], int(sys.argv[2])
blob = open(path, "rb").read()
(n,) = struct.unpack("<Q", blob[:8])
header, data = json.loads(blob[8 : 8 + n]), blob[8 + n :]
header["extra.weight"] = {"dtype": "F32", "shape": [extra // 4], "data_offsets": [len(data), len(data) + extra]}
text = json.dumps(header).encode()
with open(path, "wb") as f:
    f.write(struct.pack("<Q", len(text)) + text + data)
    f.truncate(8 + len(text) + len(data) + extra)
PYEOF
}
pad_weights "$WORK/padded" 1200000000
pad_weights "$WORK/padded-big" 3200000000
if [[ -z ${HPCTRAIN_SANITIZED:-} ]]; then
  expect_failure "eval of weights over the limit: the folder and RLIMIT_AS, not a bare allocation failure" \
    "$WORK/padded: reading the weights ran out of memory \\(.*([Cc]annot|can't) allocate memory.*\\); .* are available after it \\(the address-space limit RLIMIT_AS" \
    limited "$HPCTRAIN" eval --model "$WORK/padded" --data "$WORK/data.h5" --threads 1
  expect_failure "eval of weights the address space cannot map: mmap's ENOMEM as running out of memory, naming RLIMIT_AS" \
    "$WORK/padded-big: reading the weights ran out of memory \\(cannot memory-map '.*model.safetensors' \\(3[0-9]{9} bytes\\): Cannot allocate memory\\); .* are available after it \\(the address-space limit RLIMIT_AS" \
    limited "$HPCTRAIN" eval --model "$WORK/padded-big" --data "$WORK/data.h5" --threads 1
fi
# train under mpirun -np 2: every rank refuses (agreed in "building the model"), the job ends non-zero, no hang.
if [[ -z ${HPCTRAIN_SANITIZED:-} ]]; then
  expect_failure "train -np 2 of 400,000 layers under ulimit -v: every rank stops naming RLIMIT_AS" \
    "building the model failed on rank [01]: $DEEP/config.json: the model has [0-9]+ parameters; .* training .* \\($LIMIT" \
    limited timeout 60 mpirun --oversubscribe --bind-to none -np 2 \
    "$HPCTRAIN" train $(with_file "$WORK/config.json" "$DEEP/config.json" train_args "$WORK/run-deep")
fi

# ---- the model <-> dataset check (Note [Model fits the dataset]) ----
"$HPCTRAIN" prep text --input "$WORK/rows.jsonl" --text-field text --label-field label --tokenizer "$REPO/data/bert-base-uncased" \
  --max-length 16 --validation-fraction 0.2 --seed 3 --no-progress --output "$WORK/bert-vocab.h5" >"$WORK/prep.log" 2>&1 \
  || { cat "$WORK/prep.log"; exit 1; }
for command in eval predict; do
  expect_failure "$command: model vocab_size below the dataset's" \
    "$MODEL: vocab_size 40 is smaller than the tokenizer of '$WORK/bert-vocab.h5' \(30522 tokens\)" \
    "$HPCTRAIN" $command --model "$MODEL" --data "$WORK/bert-vocab.h5" --threads 1 $(output_of $command)
done
expect_no_file "predict: no output after a refused model" "$WORK/p.jsonl"
sed 's/"max_position_embeddings": 32/"max_position_embeddings": 4/' "$WORK/config.json" >"$WORK/short.json"
expect_failure "train: max_position_embeddings below the longest example" \
  "$WORK/data.h5:/train example [0-9]+ has [0-9]+ tokens but $WORK/short.json has max_position_embeddings 4" \
  "$HPCTRAIN" train $(with_file "$WORK/config.json" "$WORK/short.json" train_args "$WORK/run-short")
CNN=$(model_dir cnn "{\"model_type\": \"hpctrain-cnn\", $LABELS}")
expect_failure "eval: an image model on a text dataset" "$CNN: model_type 'hpctrain-cnn' is not a text model" \
  "$HPCTRAIN" eval --model "$CNN" --data "$WORK/data.h5" --threads 1

# ---- NaN/Inf weights and logits: NaN weights name the tensor; finite weights (pooled features of ~1000 times 3e38) overflow the logits ----
cp -r "$MODEL" "$WORK/nan" && "$PY" "$REPO/tests/cli/edit_weights.py" "$WORK/nan/model.safetensors" classifier.weight=nan
cp -r "$MODEL" "$WORK/inf" && "$PY" "$REPO/tests/cli/edit_weights.py" "$WORK/inf/model.safetensors" classifier.weight=3e38 pre_classifier.bias=1000
declare -A NONFINITE=(
  [nan]="$WORK/nan: tensor 'classifier.weight' holds 96 NaN/Inf value\(s\) of 96"
  [inf]="$WORK/inf on split 'validation' of $WORK/data.h5: (evaluation|prediction): the model gave NaN/Inf logits for [0-9]+ example\(s\) of the split \(the first is example [0-9]+\)"
)
for kind in nan inf; do
  for command in eval predict; do
    expect_failure "$command: $kind weights" "${NONFINITE[$kind]}" \
      "$HPCTRAIN" $command --model "$WORK/$kind" --data "$WORK/data.h5" --threads 1 $(output_of $command)
  done
done
expect_no_file "predict: no output after non-finite logits" "$WORK/p.jsonl"
expect_success "eval of the intact model still works" "$HPCTRAIN" eval --model "$MODEL" --data "$WORK/data.h5" --threads 1
finish
