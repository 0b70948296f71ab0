#!/usr/bin/env bash
# The main job end to end on the built-in default dataset: install what is missing, build (Release),
# turn Debian's fortunes into a 6-category text-classification corpus, tokenize it with the bundled
# bert-base-uncased WordPiece vocabulary into runs/data/fortunes.h5, train a small DistilBERT-architecture
# classifier on it with `mpirun -np 2`, and print validation accuracy next to the majority-class baseline.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh run
scripts/build.sh --target hpctrain
mkdir -p runs/data
python3 scripts/fortunes_to_jsonl.py --output runs/data/fortunes.jsonl
build/hpctrain prep text --input runs/data/fortunes.jsonl --text-field text --label-field label \
  --tokenizer data/bert-base-uncased --max-length 128 --validation-fraction 0.1 --seed 1 \
  --output runs/data/fortunes.h5 --overwrite
build/hpctrain inspect runs/data/fortunes.h5
# OpenMPI refuses root unless told; --oversubscribe lets 2 ranks run on a 1-core machine too.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
rm -rf runs/fortunes  # a fresh run each time (use --resume auto to continue one)
mpirun --oversubscribe --bind-to none -np 2 build/hpctrain train --model-config preset:tiny-distilbert \
  --data runs/data/fortunes.h5 --tokenizer data/bert-base-uncased --output runs/fortunes \
  --epochs 3 --batch-size 16 --lr 5e-4 --warmup-ratio 0.1
build/hpctrain eval --model runs/fortunes/final --data runs/data/fortunes.h5 --split validation
