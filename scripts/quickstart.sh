#!/usr/bin/env bash
# The main job end to end on the built-in default dataset: install what is missing, build (Release),
# turn Debian's fortunes into a 6-category text-classification corpus, tokenize it with the bundled
# bert-base-uncased WordPiece vocabulary into runs/data/fortunes.h5, and summarize it.
# (Training with `mpirun -np 2` joins this script with the training issue.)
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
