#!/usr/bin/env python3
"""The table of bench/optim/run.sh from its JSON lines (bench_optim's and torch_optim.py's): per model, thread
count and optimizer, ns per parameter of both sides (median of the runs, min-max), the peer/hpctrain time ratio
(> 1: hpctrain is faster), and the state bytes as % of the same side's AdamW, over all parameters and over the
2-D ones (hpctrain's checkpoint file size too). Usage: report.py RESULTS.jsonl"""
import json
import statistics
import sys


def spread(values):
    return f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})"


def main():
    rows = [json.loads(line) for line in open(sys.argv[1])]
    runs, last, errors = {}, {}, {}
    for r in rows:
        key = (r["model"], r["threads"], r["optim"], r["impl"])
        if "error" in r:
            errors[key] = r["error"]
            continue
        runs.setdefault(key, []).append(r["ns_per_param"])
        last[key] = r

    def pct(key, field):
        adamw = last[key[:2] + ("adamw_torch", key[3])]
        return f"{100 * last[key][field] / adamw[field]:.1f}"

    print("| model | threads | optim | hpctrain ns/param | peer ns/param | peer / hpctrain | state % of AdamW "
          "(hpctrain / peer) | 2-D weights' state % (hpctrain / peer) | hpctrain file % |")
    print("|---|---:|---|---:|---:|---:|---:|---:|---:|")
    for key, ours in runs.items():
        model, threads, optim, impl = key
        if impl != "hpctrain":
            continue
        peer = (model, threads, optim, "torch")
        if peer in runs:
            theirs = spread(runs[peer])
            ratio = f"{statistics.median(runs[peer]) / statistics.median(ours):.2f}"
            peer_pct, peer_pct_2d = pct(peer, "state_bytes"), pct(peer, "state_bytes_2d")
        else:
            theirs, ratio, peer_pct, peer_pct_2d = f"did not run: {errors.get(peer, 'no result')}", "-", "-", "-"
        print(f"| {model} | {threads} | {optim} | {spread(ours)} | {theirs} | {ratio} | "
              f"{pct(key, 'state_bytes')} / {peer_pct} | {pct(key, 'state_bytes_2d')} / {peer_pct_2d} | "
              f"{pct(key, 'file_bytes')} |")


if __name__ == "__main__":
    main()
