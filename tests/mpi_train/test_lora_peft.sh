# LoRA adapters against the real `peft` package (issue 24 item 4; docs/lora-peft.md): on random BERT and DistilBERT
# classifiers, a random GPT-2 and a headless BertModel (2 labels by default; peft loads it with num_labels = the
# data's, hpctrain takes the count from the adapter: Note [Adapter labels]) that transformers made, (1) hpctrain trains a LoRA adapter on 2 ranks, its final/
# holds exactly the tensors peft saves for its adapter_config.json, and PeftModel.from_pretrained(base, final/) gives
# the logits (per-row loss sums for the causal LM) that `hpctrain predict --model BASE --adapter final/` writes,
# within 1e-4; (2) an adapter trained by peft in python loads in `hpctrain eval --model BASE --adapter DIR` and
# evaluates to peft's loss and accuracy. Needs HPCTRAIN_TRANSFORMERS_PYTHON, a python with torch 2.x, transformers,
# peft and h5py (scripts/test-torch2.sh sets it; scripts/setup-torch2.sh pins peft); without one the test is skipped.
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
# kind_args KIND: the data, tokenizer and targets of each model (BERT and DistilBERT classifiers, a GPT-2, a headless BERT).
kind_args() {
  case $1 in
    bert | headless) echo --data "$WORK/data.h5" --tokenizer "$WORK/tok" --lora-target-modules query,value ;;
    distilbert) echo --data "$WORK/data.h5" --tokenizer "$WORK/tok" --lora-target-modules q_lin,v_lin ;;
    gpt2) echo --data "$WORK/packed.h5" --tokenizer "$BPE" --lora-target-modules c_attn ;;
  esac
}
data_of() { [[ $1 == gpt2 ]] && echo "$WORK/packed.h5" || echo "$WORK/data.h5"; }
use=(--split validation --batch-size 5 --threads 1)
for kind in bert distilbert gpt2 headless; do
  # (1) hpctrain's adapter, read by peft (lora_peft.py check).
  run_ok "$kind: LoRA training on 2 ranks" "$WORK/train-$kind.log" mpi 2 train --model "$WORK/$kind-base" \
    $(kind_args $kind) --output "$WORK/lora-$kind" "${lora[@]}"
  run_ok "$kind: predict --adapter" "$WORK/pred-$kind.log" mpi 2 predict --model "$WORK/$kind-base" \
    --adapter "$WORK/lora-$kind/final" --data "$(data_of $kind)" "${use[@]}" --output "$WORK/pred-$kind.jsonl"
  # (2) peft's adapter, read by hpctrain.
  run_ok "$kind: eval --adapter on peft's adapter" "$WORK/eval-peft-$kind.log" mpi 2 eval --model "$WORK/$kind-base" \
    --adapter "$WORK/peft-$kind" --data "$(data_of $kind)" "${use[@]}" --json
  sed -n '/^{/,/^}/p' "$WORK/eval-peft-$kind.log" >"$WORK/eval-peft-$kind.json"
done

"$PEFT_PY" "$HERE/lora_peft.py" check "$WORK" >"$WORK/check.log" 2>&1
cat "$WORK/check.log"
passed=$((passed + $(grep -c '^ok: ' "$WORK/check.log")))
failed=$((failed + $(grep -c '^FAILED: ' "$WORK/check.log")))
grep -q '^ok: ' "$WORK/check.log" || bad "peft checks ran"
finish
