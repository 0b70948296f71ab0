#!/usr/bin/env bash
# Issue 21's causal-LM benchmark: `hpctrain train` against transformers' own models under PyTorch DDP (torch_lm.py:
# AutoModelForCausalLM.from_config, SDPA attention, gloo), both launched by mpirun, on random token rows of 128
# (make_data.py). Models: gpt2.json (GPT-2 style: width 256, 4 layers, 4 heads, vocabulary 50257, tied head) and
# llama.json (Llama style: width 256, 4 layers, 4 heads / 2 KV heads, SwiGLU 768, vocabulary 32000, untied head).
# Rows: each model x fp32 / bf16 (autocast on both sides) x 1 / 2 ranks, 1 thread per rank, the same global batch
# (GLOBAL_BATCH rows: per rank GLOBAL_BATCH / ranks), AdamW (lr 1e-4, no weight decay) with the gradient norm clipped
# at 1 on both sides (hpctrain's and HF Trainer's default). A run: WARMUP steps, then STEPS timed steps; tokens/s =
# input tokens / the timed steps' summed time (hpctrain: metrics.jsonl's per-step time and tokens; the peer: the
# same span, start of step to end of optimizer step, on rank 0). Each row is a pair (hpctrain, then the peer; the
# order flips every round), the whole matrix repeated ROUNDS times, interleaved; the table gives the median and
# min-max over the rounds and the ratio of each round's pair. Peak RSS: GNU time's maximum resident set of the
# mpirun tree (its largest process: a rank). MFU: Note [Model FLOPs] (6 N + 12 L d T per token) over the peak that
# the first hpctrain run of each precision measured (its bf16 or fp32 matrix products; later runs get it as
# --peak-tflops), the same peak for the peer. Builds nothing.
# Usage: bench/lm/run.sh [BUILD_DIR=build] [ROUNDS=3] [STEPS=8] [WARMUP=2]
# Environment: PYTHON (the peer's interpreter, with torch 2.x, transformers and h5py; default .venv-torch2/bin/python,
# which scripts/setup-torch2.sh makes), GLOBAL_BATCH (default 8), RESULTS (a JSON-lines file to keep the runs in and
# append to; FIRST_ROUND numbers the rounds of a later invocation after those already there), MODELS / PRECISIONS /
# RANKS (default "gpt2 llama", "fp32 bf16", "1 2": a smaller matrix).
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
rounds=${2:-3}
steps=${3:-8}
warmup=${4:-2}
python=${PYTHON:-.venv-torch2/bin/python}
global_batch=${GLOBAL_BATCH:-8}
read -r -a models <<<"${MODELS:-gpt2 llama}"
read -r -a precisions <<<"${PRECISIONS:-fp32 bf16}"
read -r -a rank_counts <<<"${RANKS:-1 2}"
# shellcheck source=../machine.sh
source bench/machine.sh
bench_workspace lm "$build"
"$python" -c 'import torch.distributed, transformers, h5py' 2>/dev/null ||
  { echo "error: $python cannot import torch, transformers and h5py (set PYTHON; scripts/setup-torch2.sh)" >&2; exit 1; }
[[ -x /usr/bin/time ]] || { echo "error: /usr/bin/time (GNU time) is missing: apt-get install time" >&2; exit 1; }

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
mpirun=(mpirun --oversubscribe --bind-to none)
"$python" bench/lm/make_data.py "$work/lm.h5" --rows $(( (warmup + steps) * global_batch )) --vocab 32000

# Which kernels run: OpenBLAS's choice for hpctrain's fp32 products (hpctrain env), the ATen CPU capability, BLAS and
# oneDNN of the peer's torch, and the oneDNN matmul implementations each side runs in bf16 (ONEDNN_VERBOSE, one step).
echo "hpctrain: $("$hpctrain" env | grep -E '^(LibTorch|BLAS)' | tr -s ' ' | paste -sd';')"
"$python" bench/lm/torch_lm.py --describe
onednn_kernels() {  # onednn_kernels LOG: the matmul implementations oneDNN reported, with their counts
  grep -ho 'exec,cpu,matmul,[^,]*' "$1" | cut -d, -f4 | sort | uniq -c | sort -rn | awk '{printf "%s x%s ", $2, $1}'
}
ONEDNN_VERBOSE=1 "${mpirun[@]}" -np 1 "$hpctrain" train --data "$work/lm.h5" --model-config bench/lm/gpt2.json \
  --output "$work/kernels" --max-steps 1 --batch-size 1 --threads 1 --no-progress --report-to none \
  --mixed-precision bf16 --peak-tflops 1 >"$work/kernels-hpctrain.log" 2>&1 || true
ONEDNN_VERBOSE=1 "${mpirun[@]}" -np 1 "$python" bench/lm/torch_lm.py --config bench/lm/gpt2.json --data "$work/lm.h5" \
  --batch 1 --steps 1 --warmup 0 --mixed-precision bf16 >"$work/kernels-peer.log" 2>&1 || true
echo "bf16 matmuls (oneDNN): hpctrain $(onednn_kernels "$work/kernels-hpctrain.log"); peer $(onednn_kernels "$work/kernels-peer.log")"
echo "running alongside:"
pgrep -a 'hpctrain|bench_|ninja|cc1plus|ctest|python' | cut -c1-120 | sed 's/^/  /' || echo "  nothing matching"

declare -A peak_tflops=()
port=29711
# run_hpctrain MODEL PRECISION RANKS ROUND: one hpctrain run, its result line appended to $results.
run_hpctrain() {
  local model=$1 precision=$2 ranks=$3 round=$4 out=$work/run peak=()
  rm -rf "$out"
  [[ -n ${peak_tflops[$precision]:-} ]] && peak=(--peak-tflops "${peak_tflops[$precision]}")
  local mixed=no
  [[ $precision == bf16 ]] && mixed=bf16
  /usr/bin/time -f %M -o "$work/rss" "${mpirun[@]}" -np "$ranks" "$hpctrain" train --data "$work/lm.h5" \
    --model-config "bench/lm/$model.json" --output "$out" --max-steps $((warmup + steps)) \
    --batch-size $((global_batch / ranks)) --threads 1 --mixed-precision "$mixed" --lr 1e-4 --max-grad-norm 1 \
    --logging-steps 1 --report-to none --no-progress "${peak[@]}" >"$work/hpctrain.log" 2>&1 ||
    { tail -20 "$work/hpctrain.log" >&2; return 1; }
  if [[ -z ${peak_tflops[$precision]:-} ]]; then  # "MFU: against a peak of X GFLOP/s per rank"
    peak_tflops[$precision]=$(sed -n 's/.*against a peak of \([0-9.]*\) GFLOP.*/\1/p' "$work/hpctrain.log" | head -1 |
      awk '{print $1 / 1000}')
  fi
  "$python" - "$out/metrics.jsonl" "$warmup" "$model" "$precision" "$ranks" "$round" "$(cat "$work/rss")" \
    "${peak_tflops[$precision]}" >>"$results" <<'PY'
import json, sys
path, warmup, model, precision, ranks, round_, rss_kib, peak = sys.argv[1:]
steps = [e for e in map(json.loads, open(path)) if "tokens" in e and e["step"] > int(warmup)]
seconds = sum(e["time"]["step"] for e in steps)
tokens = sum(e["tokens"] for e in steps)
flops = sum(e["mfu"] * e["time"]["step"] for e in steps) * float(peak) * 1e12 * int(ranks)  # the steps' model FLOPs
print(json.dumps({"impl": "hpctrain", "model": model, "precision": precision, "ranks": int(ranks), "round": int(round_),
                  "steps": len(steps), "tokens_per_second": tokens / seconds, "flops_per_token": flops / tokens,
                  "peak_tflops": float(peak), "peak_rss_kib": int(rss_kib), "final_loss": steps[-1]["loss"]}))
PY
}
# run_peer MODEL PRECISION RANKS ROUND: one transformers + DDP run, likewise.
run_peer() {
  local model=$1 precision=$2 ranks=$3 round=$4 mixed=no line
  [[ $precision == bf16 ]] && mixed=bf16
  port=$((port + 1))
  line=$(/usr/bin/time -f %M -o "$work/rss" "${mpirun[@]}" -np "$ranks" "$python" bench/lm/torch_lm.py \
    --config "bench/lm/$model.json" --data "$work/lm.h5" --batch $((global_batch / ranks)) --steps "$steps" \
    --warmup "$warmup" --threads 1 --mixed-precision "$mixed" --port "$port" 2>"$work/peer.log" | grep '^{') ||
    { tail -20 "$work/peer.log" >&2; return 1; }
  "$python" -c 'import json, sys; r = json.loads(sys.argv[1]); r.update(impl_name=r["impl"], impl="peer", \
precision=sys.argv[2], round=int(sys.argv[3]), peak_rss_kib=int(sys.argv[4])); print(json.dumps(r))' \
    "$line" "$precision" "$round" "$(cat "$work/rss")" >>"$results"
}

first_round=${FIRST_ROUND:-1}
for round in $(seq "$first_round" $((first_round + rounds - 1))); do
  echo "round $round of $first_round-$((first_round + rounds - 1)): $(date -u +%H:%M:%S) UTC, load average $(cut -d' ' -f1-3 /proc/loadavg)"
  for model in "${models[@]}"; do
    for precision in "${precisions[@]}"; do
      for ranks in "${rank_counts[@]}"; do
        if (( round % 2 == 1 )) || [[ -z ${peak_tflops[$precision]:-} ]]; then
          run_hpctrain "$model" "$precision" "$ranks" "$round" && run_peer "$model" "$precision" "$ranks" "$round"
        else
          run_peer "$model" "$precision" "$ranks" "$round" && run_hpctrain "$model" "$precision" "$ranks" "$round"
        fi
        tail -2 "$results" | "$python" bench/lm/summary.py --progress -
      done
    done
  done
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg) ($(date -u +%H:%M:%S) UTC)"
"$python" bench/lm/summary.py "$results"
