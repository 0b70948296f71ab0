"""bench/lora/run.sh's result lines and table.
Usage: summary.py --hpctrain OUTPUT WARMUP MODEL SIDE ROUND PEAK_RSS_KIB   (one hpctrain run's result line)
       summary.py --progress FILE        (one line per run: run.sh's progress; FILE - for stdin)
       summary.py RESULTS.jsonl          (the table: per model and side, steps/s, peak RSS, optimizer state and
                                          bytes on the wire per step: the median over the rounds, min-max)
"""
import glob
import json
import os
import struct
import sys
from statistics import median

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lm"))
from summary import cell  # noqa: E402  (bench/lm's: the median, then (min-max))

DTYPE_BYTES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1, "BOOL": 1}


def safetensors_state_bytes(path):
    """The bytes of a safetensors file's tensors with at least one dimension (not the scalar step counts)."""
    with open(path, "rb") as f:
        header = json.loads(f.read(struct.unpack("<Q", f.read(8))[0]))
    total = 0
    for name, t in header.items():
        if name != "__metadata__" and t["shape"]:
            n = 1
            for d in t["shape"]:
                n *= d
            total += n * DTYPE_BYTES[t["dtype"]]
    return total


def hpctrain_result(out, warmup, model, side, round_, rss_kib):
    entries = [e for e in map(json.loads, open(f"{out}/metrics.jsonl")) if "loss" in e]
    timed = [e for e in entries if e["step"] > int(warmup)]
    state = max((e["optimizer_state_bytes"] for e in entries if "optimizer_state_bytes" in e), default=None)
    source = "metrics.jsonl"
    if state is None:  # an older build: the last checkpoint's optimizer state (every rank holds all of it)
        files = sorted(glob.glob(f"{out}/checkpoint-*/optimizer*.safetensors"))
        state, source = (safetensors_state_bytes(files[-1]), "checkpoint") if files else (0, "none")
    return {"impl": "hpctrain", "side": side, "model": model, "round": int(round_), "steps": len(timed),
            "steps_per_second": len(timed) / sum(e["time"]["step"] for e in timed),
            "comm_bytes": median(e["comm_bytes"] for e in timed), "optimizer_state_bytes": state,
            "optimizer_state_from": source, "peak_rss_kib": int(rss_kib), "final_loss": timed[-1]["loss"]}


def size(n):
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n:.0f} B"


def progress(lines):
    for r in map(json.loads, lines):
        print(f"  {r['side']:5} {r['model']:6}: {r['steps_per_second']:.3f} steps/s, peak RSS {r['peak_rss_kib'] / 1024:.0f} "
              f"MiB, optimizer state {size(r['optimizer_state_bytes'])}, {size(r['comm_bytes'])} on the wire per step",
              flush=True)


NAMES = {"lora": "hpctrain LoRA", "full": "hpctrain full fine-tuning", "peer": "peft + transformers + DDP (LoRA)"}


def table(runs):
    peer = next((r["impl_name"] for r in runs if r["side"] == "peer"), "peer")
    print(f"peer: {peer}; rounds: {len({r['round'] for r in runs})}; timed steps per run: {runs[0]['steps']}")
    print("| model | side | steps/s | peak RSS MiB | optimizer state | bytes on the wire per step and rank "
          "| state, wire vs full |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for model in sorted({r["model"] for r in runs}, key=lambda m: m != "minilm"):
        full = [r for r in runs if (r["model"], r["side"]) == (model, "full")]
        for side in ("lora", "full", "peer"):
            rs = [r for r in runs if (r["model"], r["side"]) == (model, side)]
            if not rs:
                continue
            state, wire = median(r["optimizer_state_bytes"] for r in rs), median(r["comm_bytes"] for r in rs)
            versus = ""
            if full and side != "full":
                versus = (f"{state / median(r['optimizer_state_bytes'] for r in full):.2%}, "
                          f"{wire / median(r['comm_bytes'] for r in full):.2%}")
            print(f"| {model} | {NAMES[side]} | {cell([r['steps_per_second'] for r in rs], '{:.3f}')} | "
                  f"{cell([r['peak_rss_kib'] / 1024 for r in rs])} | {size(state)} | {size(wire)} | {versus} |")


def main():
    if sys.argv[1] == "--hpctrain":
        print(json.dumps(hpctrain_result(*sys.argv[2:8])))
    elif sys.argv[1] == "--progress":
        progress(sys.stdin if sys.argv[2] == "-" else open(sys.argv[2]))
    else:
        table([json.loads(line) for line in open(sys.argv[1]) if line.strip()])


if __name__ == "__main__":
    main()
