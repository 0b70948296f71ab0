#!/usr/bin/env bash
# Issue 34's memory benchmark: one rank's training step of a Llama-shaped model with a 128,256-id vocabulary
# (llama.json: 2 layers, width 512, untied head), batch 4 x 1,024 random tokens (bench/lm/make_data.py), fp32 on
# the CPU, AdamW with the gradient norm clipped at 1, three ways:
#   chunked    `hpctrain train` with the chunked loss (--loss-chunk-tokens CHUNK, default the built-in default);
#   unchunked  `hpctrain train --loss-chunk-tokens 0`: every predicted token's logits at once, as before issue 34;
#   peer       transformers + torch, one process (peer.py: LlamaForCausalLM, labels = input_ids).
# A run: WARMUP steps, then STEPS timed steps (hpctrain: metrics.jsonl's time.step; the peer: the same span). Peak
# RSS: GNU time's maximum resident set of the process (everything: libraries, weights, gradients, AdamW's state,
# activations, the loss); also the whole run's CPU time (user + system), steadier than wall time on a shared VM. The three run one after another in a round, their order rotated every round, ROUNDS
# rounds; summary.py prints the table (median, min-max) and the ratios against the goals: chunked peak RSS <= 0.5x
# the peer's and <= 0.6x unchunked's, chunked step time <= 1.05x unchunked's. Builds nothing.
# Usage: bench/loss/run.sh [BUILD_DIR=build] [ROUNDS=3] [STEPS=2] [WARMUP=1]
# Environment: PYTHON (the peer's interpreter with torch, transformers and h5py; default /work/peers/bin/python),
# THREADS (per process, default 2), CHUNK (--loss-chunk-tokens of the chunked runs; default: hpctrain's default),
# RESULTS (a JSON-lines file to keep the runs in), IMPLS (default "chunked unchunked peer").
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
rounds=${2:-3}
steps=${3:-2}
warmup=${4:-1}
python=${PYTHON:-/work/peers/bin/python}
threads=${THREADS:-2}
read -r -a impls <<<"${IMPLS:-chunked unchunked peer}"
batch=4 length=1024
# shellcheck source=../machine.sh
source bench/machine.sh
bench_workspace loss "$build"
"$python" -c 'import torch, transformers, h5py' 2>/dev/null ||
  { echo "error: $python cannot import torch, transformers and h5py (set PYTHON)" >&2; exit 1; }
[[ -x /usr/bin/time ]] || { echo "error: /usr/bin/time (GNU time) is missing: apt-get install time" >&2; exit 1; }

"$python" bench/lm/make_data.py "$work/lm.h5" --rows $(( (warmup + steps) * batch )) --length $length --vocab 128256
chunk_args=()
[[ -n ${CHUNK:-} ]] && chunk_args=(--loss-chunk-tokens "$CHUNK")
echo "chunked runs: --loss-chunk-tokens ${CHUNK:-(the default)}"

# record IMPL ROUND STEP_SECONDS... : one result line (peak RSS and the run's CPU seconds from $work/rss).
record() {
  local impl=$1 round=$2; shift 2
  "$python" -c 'import json, sys; rss, user, system = sys.argv[3].split()
print(json.dumps({"impl": sys.argv[1], "round": int(sys.argv[2]), "peak_rss_kib": int(rss),
                  "cpu_s": float(user) + float(system), "step_s": [float(x) for x in sys.argv[4:]]}))' \
    "$impl" "$round" "$(cat "$work/rss")" "$@" >>"$results"
}
run_hpctrain() {  # run_hpctrain IMPL ROUND
  local args=("${chunk_args[@]}")
  [[ $1 == unchunked ]] && args=(--loss-chunk-tokens 0)
  rm -rf "$work/run"
  /usr/bin/time -f "%M %U %S" -o "$work/rss" "$hpctrain" train --data "$work/lm.h5" --model-config bench/loss/llama.json \
    --output "$work/run" --max-steps $((warmup + steps)) --batch-size $batch --threads "$threads" --lr 1e-4 \
    --max-grad-norm 1 --logging-steps 1 --report-to none --no-progress --peak-tflops 1 "${args[@]}" \
    >"$work/hpctrain.log" 2>&1 || { tail -20 "$work/hpctrain.log" >&2; return 1; }
  # shellcheck disable=SC2046
  record "$1" "$2" $("$python" -c 'import json, sys
print(*[e["time"]["step"] for e in map(json.loads, open(sys.argv[1])) if "loss" in e and e["step"] > int(sys.argv[2])])' \
    "$work/run/metrics.jsonl" "$warmup")
}
run_peer() {  # run_peer ROUND
  local line
  line=$(/usr/bin/time -f "%M %U %S" -o "$work/rss" "$python" bench/loss/peer.py --config bench/loss/llama.json \
    --data "$work/lm.h5" --batch $batch --steps "$steps" --warmup "$warmup" --threads "$threads" 2>"$work/peer.log" |
    grep '^{') || { tail -20 "$work/peer.log" >&2; return 1; }
  # shellcheck disable=SC2046
  record peer "$1" $("$python" -c 'import json, sys; print(*json.loads(sys.argv[1])["step_s"])' "$line")
}

for round in $(seq 1 "$rounds"); do
  echo "round $round of $rounds: $(date -u +%H:%M:%S) UTC, load average $(cut -d' ' -f1-3 /proc/loadavg)," \
    "$(awk '/MemAvailable/ {printf "%.1f GiB available", $2 / 1048576}' /proc/meminfo)"
  n=${#impls[@]}
  for i in $(seq 0 $((n - 1))); do
    impl=${impls[$(( (i + round - 1) % n ))]}
    if [[ $impl == peer ]]; then run_peer "$round"; else run_hpctrain "$impl" "$round"; fi
    tail -1 "$results" | "$python" bench/loss/summary.py --progress -
  done
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg) ($(date -u +%H:%M:%S) UTC)"
"$python" bench/loss/summary.py "$results"
