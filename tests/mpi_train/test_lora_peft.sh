# LoRA adapters against the real `peft` package (issue 24 item 4; docs/lora-peft.md): on a random BERT classifier
# and a random GPT-2 that transformers made, (1) hpctrain trains a LoRA adapter on 2 ranks, its final/ holds exactly
# the tensors peft saves for its adapter_config.json, and PeftModel.from_pretrained(base, final/) gives the logits
# (per-row loss sums for the causal LM) that `hpctrain predict --model BASE --adapter final/` writes, within 1e-4;
# (2) an adapter trained by peft in python loads in `hpctrain eval --model BASE --adapter DIR` and evaluates to
# peft's loss and accuracy. Needs HPCTRAIN_TRANSFORMERS_PYTHON, a python with torch 2.x, transformers, peft and h5py
# (scripts/test-torch2.sh sets it; scripts/setup-torch2.sh pins peft); without one the test is skipped.
source "$(dirname "$0")/lib.sh"
PEFT_PY=${HPCTRAIN_TRANSFORMERS_PYTHON:-}
if [[ -z "$PEFT_PY" ]] || ! "$PEFT_PY" -c 'import peft, transformers, h5py, torch' 2>/dev/null; then
  echo "SKIP: set HPCTRAIN_TRANSFORMERS_PYTHON to a python with torch, transformers, peft and h5py (scripts/setup-torch2.sh)"
  exit 0
fi
make_fixture
make_lm_fixture
"$PEFT_PY" "$HERE/lora_peft.py" prepare "$WORK" >"$WORK/prepare.log" 2>&1 \
  || { cat "$WORK/prepare.log"; echo "FAILED: peft side: base models and peft's adapters"; exit 1; }

lora=(--lora-r 4 --lora-alpha 8 --lora-dropout 0.1 --threads 1 --no-progress --report-to none --lr 2e-2
  --batch-size 4 --max-steps 6 --warmup-steps 0 --logging-steps 1)
# (1) hpctrain's adapters, read by peft.
run_ok "bert: LoRA on query,value, 2 ranks" "$WORK/train-bert.log" mpi 2 train --model "$WORK/bert-base" \
  --data "$WORK/data.h5" --tokenizer "$WORK/tok" --output "$WORK/lora-bert" --lora-target-modules query,value "${lora[@]}"
run_ok "gpt2: LoRA on c_attn, 2 ranks" "$WORK/train-gpt2.log" mpi 2 train --model "$WORK/gpt2-base" \
  --data "$WORK/packed.h5" --tokenizer "$BPE" --output "$WORK/lora-gpt2" --lora-target-modules c_attn "${lora[@]}"
run_ok "bert: predict --adapter" "$WORK/pred-bert.log" mpi 2 predict --model "$WORK/bert-base" \
  --adapter "$WORK/lora-bert/final" --data "$WORK/data.h5" --split validation --batch-size 5 --threads 1 \
  --output "$WORK/pred-bert.jsonl"
run_ok "gpt2: predict --adapter" "$WORK/pred-gpt2.log" mpi 2 predict --model "$WORK/gpt2-base" \
  --adapter "$WORK/lora-gpt2/final" --data "$WORK/packed.h5" --split validation --batch-size 5 --threads 1 \
  --output "$WORK/pred-gpt2.jsonl"
# (2) peft's adapters, read by hpctrain.
for kind in bert gpt2; do
  data=$WORK/data.h5 && [[ $kind == gpt2 ]] && data=$WORK/packed.h5
  run_ok "$kind: eval --adapter on peft's adapter" "$WORK/eval-peft-$kind.log" mpi 2 eval --model "$WORK/$kind-base" \
    --adapter "$WORK/peft-$kind" --data "$data" --split validation --batch-size 5 --threads 1 --json
  sed -n '/^{/,/^}/p' "$WORK/eval-peft-$kind.log" >"$WORK/eval-peft-$kind.json"
done

"$PEFT_PY" "$HERE/lora_peft.py" check "$WORK" >"$WORK/check.log" 2>&1
cat "$WORK/check.log"
passed=$((passed + $(grep -c '^ok: ' "$WORK/check.log")))
failed=$((failed + $(grep -c '^FAILED: ' "$WORK/check.log")))
grep -q '^ok: ' "$WORK/check.log" || bad "peft checks ran"
finish
