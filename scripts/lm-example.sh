#!/usr/bin/env bash
# A real causal-LM run end to end, beside the quick start: install what is missing, build (Release), turn every
# fortune file of Debian's `fortunes` and `fortunes-min` (15,217 fortunes, 2.5 MB of English) into JSONL, tokenize
# it with the byte-level BPE tokenizer shipped in data/fortunes-bpe/ (4,096 ids, trained on this corpus:
# data/fortunes-bpe/README.md) into rows of 128 tokens (`prep lm`, 5 % of the fortunes held out), train a small
# model from scratch on it with `mpirun -np 2` for one epoch (196 steps of 32 x 128 tokens), and print the
# validation perplexity of the untrained and the trained model (`eval --json`) and a sample (`generate`, when the
# binary has it).
#
# Usage: scripts/lm-example.sh [--model gpt2|llama] [--quick]
#   --model gpt2   (default) GPT-2, 4 layers, width 192, 6 heads, tied head: data/lm-example/gpt2.json (2.8 M parameters)
#   --model llama  Llama, 4 layers, width 192, 6 heads / 2 KV heads (grouped-query attention), SwiGLU 512, RoPE,
#                  untied head: data/lm-example/llama.json (3.1 M parameters)
#   --quick        10 steps instead of the epoch (a smoke test: checks the pipeline, learns little)
# Environment: HPCTRAIN_SKIP_INSTALL=1 (no apt-get), HPCTRAIN_BUILD_DIR (default build), LM_THREADS (threads per
# rank, default: the cores / 2). Outputs: runs/data/fortunes-lm.{jsonl,h5}, runs/lm-MODEL/ (final/ loads with
# transformers' AutoModelForCausalLM and AutoTokenizer), runs/lm-MODEL/init/ (the untrained model).
# Measured results: README.md, "A real LM run".
set -euo pipefail
cd "$(dirname "$0")/.."
model=gpt2
quick=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --model) model=${2:?--model gpt2|llama}; shift 2 ;;
    --quick) quick=1; shift ;;
    -h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "lm-example: unknown argument '$1' (--model gpt2|llama, --quick)" >&2; exit 2 ;;
  esac
done
[[ $model == gpt2 || $model == llama ]] || { echo "lm-example: --model gpt2 or llama, got '$model'" >&2; exit 2; }
build=${HPCTRAIN_BUILD_DIR:-build}
hpctrain=$build/hpctrain
scripts/install-deps.sh run  # the build packages and the corpus (Debian's fortunes)
scripts/build.sh --target hpctrain

mkdir -p runs/data
python3 scripts/fortunes_to_jsonl.py --categories all --output runs/data/fortunes-lm.jsonl
"$hpctrain" prep lm --input runs/data/fortunes-lm.jsonl --text-field text --tokenizer data/fortunes-bpe \
  --block-size 128 --validation-fraction 0.05 --seed 1 --output runs/data/fortunes-lm.h5 --overwrite

# OpenMPI refuses root unless told; --oversubscribe lets 2 ranks run on a 1-core machine too.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
threads=${LM_THREADS:-$(( $(nproc) > 2 ? $(nproc) / 2 : 1 ))}
mpi=(mpirun --oversubscribe --bind-to none -np 2)
out=runs/lm-$model
rm -rf "$out"  # a fresh run each time (use --resume auto to continue one)
common=(--data runs/data/fortunes-lm.h5 --model-config "data/lm-example/$model.json" --tokenizer data/fortunes-bpe
  --batch-size 16 --threads "$threads" --seed 1 --report-to none)

# The untrained model, for the "before" figure: one step at learning rate 0 leaves the initial weights as they are.
"${mpi[@]}" "$hpctrain" train "${common[@]}" --output "$out/init" --max-steps 1 --lr 0 --no-progress >/dev/null
steps=(--epochs 1)
[[ $quick == 1 ]] && steps=(--max-steps 10)
start=$(date +%s)
"${mpi[@]}" "$hpctrain" train "${common[@]}" --output "$out" "${steps[@]}" --lr 2e-3 --lr-scheduler cosine \
  --warmup-steps 20 --weight-decay 0.1 --logging-steps 20 --eval-steps 50
seconds=$(( $(date +%s) - start ))

before=$("$hpctrain" eval --model "$out/init/final" --data runs/data/fortunes-lm.h5 --split validation --json)
after=$("$hpctrain" eval --model "$out/final" --data runs/data/fortunes-lm.h5 --split validation --json)
echo "validation, untrained: $before"
echo "validation, trained:   $after"
perplexity() { python3 -c 'import json, sys; print("%.1f" % json.loads(sys.argv[1])["perplexity"])' "$1"; }
echo "lm-example ($model): validation perplexity $(perplexity "$before") -> $(perplexity "$after"), training ${seconds} s" \
  "on $(nproc) cores (2 ranks x $threads threads; load average $(cut -d' ' -f1-3 /proc/loadavg))"

# A sample from the trained model.
"$hpctrain" generate --model "$out/final" --prompt "The meaning of life is" --max-new-tokens 60 --temperature 0.8 \
  --top-k 40 --seed 1
