#!/usr/bin/env bash
# bench_train's options for bench/efficient/run.sh: accumulation and local SGD at 2 ranks count their samples
# (micro-batches x batch x ranks) and report memory; gradient checkpointing keeps fewer activation bytes at the
# end of forward than no checkpointing (the allocator counts them). Usage: test_bench_train.sh BENCH_TRAIN MPIRUN
set -euo pipefail
bench=$1
mpirun=${2:-mpirun}
tiny=(--model distilbert --threads 1 --steps 1 --warmup 0 --sync on --seq-length 32 --batch 4)
run() {  # the JSON line of one run, or its output and a failure
  local out
  out=$("$mpirun" --oversubscribe --bind-to none "$@" 2>&1) || true
  grep '^{' <<<"$out" | tail -1 || { echo "FAIL: no result from bench_train $*:" >&2; echo "$out" >&2; return 1; }
}

accumulated=$(run -np 2 "$bench" "${tiny[@]}" --accumulation 2 --local-sgd-steps 1 --mixed-precision bf16)
plain=$(run -np 1 "$bench" "${tiny[@]}" --gradient-checkpointing off)
checkpointed=$(run -np 1 "$bench" "${tiny[@]}" --gradient-checkpointing on)
python3 - "$accumulated" "$plain" "$checkpointed" <<'PY'
import sys, json
accumulated, plain, checkpointed = (json.loads(a) for a in sys.argv[1:])
on = accumulated["on"]
assert accumulated["ranks"] == 2 and accumulated["accumulation"] == 2 and accumulated["local_sgd_steps"] == 1, accumulated
samples = on["samples_per_s_mean"] * on["mean_s"]
assert abs(samples - 2 * 4 * 2) < 1e-6, f"samples per step: expected 16 (2 micro-batches x 4 x 2 ranks), got {samples}"
for run in (accumulated, plain, checkpointed):
    memory = run["memory"]
    assert memory["peak_rss_bytes"] > memory["activation_peak_bytes"] >= memory["activation_kept_bytes"] > 0, memory
kept_plain, kept_checkpointed = plain["memory"]["activation_kept_bytes"], checkpointed["memory"]["activation_kept_bytes"]
assert checkpointed["gradient_checkpointing"] and not plain["gradient_checkpointing"]
assert kept_checkpointed < kept_plain / 2, f"checkpointing kept {kept_checkpointed} bytes, without {kept_plain}"
print(f"ok: 16 samples per accumulated step; kept activations {kept_plain} -> {kept_checkpointed} bytes")
PY
