#!/usr/bin/env bash
# A real supervised fine-tuning run end to end: install what is missing, build (Release), turn the GNU Collaborative
# International Dictionary of English (Debian's dict-gcide) into conversations ("What does the word X mean?" -> the
# word's first definition; scripts/gcide_to_sft.py), render them with the model's chat template into token rows
# whose loss mask holds the assistant's tokens only (`prep sft`: trl's Qwen 2.5 training template, the small
# Qwen2.5-style tokenizer in data/sft-example/tokenizer/, 5 % held out), train a small Qwen2 model
# (data/sft-example/qwen2.json) on it with `mpirun -np 2`, and print the validation loss on the assistant's tokens
# of the untrained and the trained model (`eval --json`) and its answers to a few questions (`generate --chat`).
#
# Usage: scripts/sft-example.sh [--rows N] [--epochs E] [--quick]
#   --rows N    conversations taken from the dictionary (default 6000)
#   --epochs E  passes over them (default 1)
#   --quick     10 steps on 2000 rows (a smoke test: checks the pipeline, learns little)
# Environment: HPCTRAIN_SKIP_INSTALL=1 (no apt-get), HPCTRAIN_BUILD_DIR (default build), SFT_THREADS (threads per
# rank, default: the cores / 2). Outputs: runs/data/gcide-sft.{jsonl,h5}, runs/sft/ (final/ loads with transformers'
# AutoModelForCausalLM; its tokenizer and chat template are copied beside it), runs/sft/init/ (the untrained model).
# Measured results: README.md, "Supervised fine-tuning".
set -euo pipefail
cd "$(dirname "$0")/.."
rows=6000
epochs=1
quick=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --rows) rows=${2:?--rows N}; shift 2 ;;
    --epochs) epochs=${2:?--epochs E}; shift 2 ;;
    --quick) quick=1; rows=2000; shift ;;
    -h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "sft-example: unknown argument '$1' (--rows N, --epochs E, --quick)" >&2; exit 2 ;;
  esac
done
build=${HPCTRAIN_BUILD_DIR:-build}
hpctrain=$build/hpctrain
tokenizer=data/sft-example/tokenizer
scripts/install-deps.sh run  # the build packages and the dictionary (dict-gcide)
scripts/build.sh --target hpctrain

mkdir -p runs/data
python3 scripts/gcide_to_sft.py --rows "$rows" --output runs/data/gcide-sft.jsonl
"$hpctrain" prep sft --input runs/data/gcide-sft.jsonl --tokenizer "$tokenizer" --max-length 128 \
  --validation-fraction 0.05 --seed 1 --output runs/data/gcide-sft.h5 --overwrite

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
threads=${SFT_THREADS:-$(( $(nproc) > 2 ? $(nproc) / 2 : 1 ))}
mpi=(mpirun --oversubscribe --bind-to none -np 2)
out=runs/sft
rm -rf "$out"
common=(--data runs/data/gcide-sft.h5 --model-config data/sft-example/qwen2.json --tokenizer "$tokenizer"
  --batch-size 16 --threads "$threads" --seed 1 --report-to none)
# The untrained model, for the "before" figure: one step at learning rate 0 leaves the initial weights as they are.
"${mpi[@]}" "$hpctrain" train "${common[@]}" --output "$out/init" --max-steps 1 --lr 0 --no-progress >/dev/null
steps=(--epochs "$epochs")
[[ $quick == 1 ]] && steps=(--max-steps 10)
start=$(date +%s)
"${mpi[@]}" "$hpctrain" train "${common[@]}" --output "$out" "${steps[@]}" --lr 3e-3 --lr-scheduler cosine \
  --warmup-steps 30 --weight-decay 0.1 --logging-steps 50 --eval-steps 200
seconds=$(( $(date +%s) - start ))
cp "$tokenizer/chat_template.jinja" "$out/final/"  # train copies the tokenizer files; the template goes beside them

before=$("$hpctrain" eval --model "$out/init/final" --data runs/data/gcide-sft.h5 --split validation --json)
after=$("$hpctrain" eval --model "$out/final" --data runs/data/gcide-sft.h5 --split validation --json)
echo "validation (assistant tokens), untrained: $before"
echo "validation (assistant tokens), trained:   $after"
loss() { python3 -c 'import json, sys; e = json.loads(sys.argv[1]); print("%.3f over %d tokens" % (e["loss"], e["tokens"]))' "$1"; }
echo "sft-example: validation loss on the assistant's tokens $(loss "$before") -> $(loss "$after"), training" \
  "${seconds} s on $(nproc) cores (2 ranks x $threads threads; load average $(cut -d' ' -f1-3 /proc/loadavg))"

# The trained model answers (greedy); the first two words are in the training data, the last two are not words.
for word in apple serene house glorptax; do
  echo "--- What does the word $word mean?"
  "$hpctrain" generate --model "$out/final" --tokenizer "$tokenizer" --chat --prompt "What does the word $word mean?" \
    --max-new-tokens 48
done
