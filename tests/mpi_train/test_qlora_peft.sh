# QLoRA against transformers + bitsandbytes + peft (issue 35; docs/qlora.md): on a random BERT classifier, GPT-2 and
# Llama that transformers made (widths multiples of 64, as bitsandbytes' CPU dequantizer needs: qlora_peft.py), (0) `hpctrain predict --quantize-base nf4` with a fresh adapter gives the outputs of
# the bitsandbytes 4-bit base (nf4, double quantization, float32 compute) within 1e-4 relative; (1) hpctrain trains a
# QLoRA adapter on 2 ranks and peft, loading it onto the bitsandbytes base, gives hpctrain predict's outputs (1e-4);
# (2) a QLoRA adapter peft trained evaluates in `hpctrain eval --quantize-base nf4` to peft's loss; (3) GPT-2's
# --merge-lora folder (dequantized, merged, float32) gives peft's outputs in plain transformers. Needs
# HPCTRAIN_TRANSFORMERS_PYTHON with torch 2.x, transformers, peft, bitsandbytes and h5py (scripts/test-torch2.sh);
# without one the test is skipped.
source "$(dirname "$0")/lib.sh"
PEFT_PY=${HPCTRAIN_TRANSFORMERS_PYTHON:-}
if [[ -z "$PEFT_PY" ]] || ! "$PEFT_PY" -c 'import peft, transformers, bitsandbytes, h5py, torch' 2>/dev/null; then
  echo "SKIP: set HPCTRAIN_TRANSFORMERS_PYTHON to a python with torch, transformers, peft, bitsandbytes and h5py (scripts/setup-torch2.sh)"
  exit 0
fi
make_fixture
make_lm_fixture
"$PEFT_PY" "$HERE/qlora_peft.py" prepare "$WORK" >"$WORK/prepare.log" 2>&1 \
  || { cat "$WORK/prepare.log"; echo "FAILED: peft side: base models and peft's QLoRA adapters"; exit 1; }

qlora=(--quantize-base nf4 --lora-r 4 --lora-alpha 8 --lora-dropout 0.1 --threads 1 --no-progress --report-to none
  --lr 2e-2 --batch-size 4 --max-steps 4 --warmup-steps 0 --logging-steps 1)
kind_args() {
  case $1 in
    bert) echo --data "$WORK/data.h5" --tokenizer "$WORK/tok" --lora-target-modules query,value ;;
    gpt2) echo --data "$WORK/packed.h5" --tokenizer "$BPE" --lora-target-modules c_attn --merge-lora ;;
    llama) echo --data "$WORK/packed.h5" --tokenizer "$BPE" --lora-target-modules q_proj,v_proj ;;
  esac
}
data_of() { [[ $1 == bert ]] && echo "$WORK/data.h5" || echo "$WORK/packed.h5"; }
# Training runs on 2 ranks; predict and eval on one process (no launcher: what they compute does not depend on the
# ranks, and mpi.train.qlora covers eval on 2 ranks).
use=(--quantize-base nf4 --split validation --batch-size 16 --threads 1 --no-progress)
for kind in bert gpt2 llama; do
  run_ok "$kind: predict --quantize-base nf4 with a fresh adapter" "$WORK/pred-zero-$kind.log" "$HPCTRAIN" predict \
    --model "$WORK/$kind-base" --adapter "$WORK/zero-$kind" --data "$(data_of $kind)" "${use[@]}" \
    --output "$WORK/pred-zero-$kind.jsonl"
  run_ok "$kind: QLoRA training on 2 ranks" "$WORK/train-$kind.log" mpi 2 train --model "$WORK/$kind-base" \
    $(kind_args $kind) --output "$WORK/qlora-$kind" "${qlora[@]}"
  run_ok "$kind: predict --quantize-base nf4 --adapter" "$WORK/pred-qlora-$kind.log" "$HPCTRAIN" predict \
    --model "$WORK/$kind-base" --adapter "$WORK/qlora-$kind/final" --data "$(data_of $kind)" "${use[@]}" \
    --output "$WORK/pred-qlora-$kind.jsonl"
  run_ok "$kind: eval --quantize-base nf4 --adapter on peft's QLoRA adapter" "$WORK/eval-peft-$kind.log" "$HPCTRAIN" \
    eval --model "$WORK/$kind-base" --adapter "$WORK/peft-$kind" --data "$(data_of $kind)" "${use[@]}" --json
  sed -n '/^{/,/^}/p' "$WORK/eval-peft-$kind.log" >"$WORK/eval-peft-$kind.json"
done

"$PEFT_PY" "$HERE/qlora_peft.py" check "$WORK" >"$WORK/check.log" 2>&1
cat "$WORK/check.log"
passed=$((passed + $(grep -c '^ok: ' "$WORK/check.log")))
failed=$((failed + $(grep -c '^FAILED: ' "$WORK/check.log")))
grep -q '^ok: ' "$WORK/check.log" || bad "peft checks ran"
finish
