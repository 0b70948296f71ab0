#!/usr/bin/python3
"""The summary of bench/efficient/run.sh: the technique table (samples/s from the mean step, median over the
rounds with their min-max, hpctrain / PyTorch ratio, peak RSS and allocator-counted activation bytes per rank)
and issue 9's goals, met or missed, with the figures. Usage: summary.py RESULTS.jsonl ROW...
(RESULTS: one {"row", "result"} object a line, as run.sh writes them.)"""
import json
import sys
from statistics import median

MIB = 2**20


def load(path):
    runs = {}
    for line in open(path):
        entry = json.loads(line)
        r = entry["result"]
        runs.setdefault((entry["row"], r["impl"] == "hpctrain", r["ranks"]), []).append(r)
    return runs


def speed(runs):
    return sorted(r["on"]["samples_per_s_mean"] for r in runs)


def cell(values, fmt="{:.1f}"):
    """Median of the rounds, then (min-max) when there are several."""
    text = fmt.format(median(values))
    return text if len(values) < 2 else f"{text} ({fmt.format(min(values))}-{fmt.format(max(values))})"


def memory(runs, key):
    return [r["memory"][key] / MIB for r in runs]


def table(runs, rows):
    print("| technique | ranks | hpctrain samples/s | PyTorch samples/s | hpctrain / PyTorch | hpctrain peak RSS MiB "
          "| PyTorch peak RSS MiB | hpctrain activations MiB, peak / kept | PyTorch activations MiB, peak / kept |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for row in rows:
        for ranks in (1, 2):
            ours, theirs = runs.get((row, True, ranks), []), runs.get((row, False, ranks), [])
            if not ours or not theirs:
                continue
            ratios = [a["on"]["samples_per_s_mean"] / b["on"]["samples_per_s_mean"] for a, b in zip(ours, theirs)]
            ratio = cell(ratios, "{:.2f}")
            cells = [row, str(ranks), cell(speed(ours)), cell(speed(theirs)), ratio,
                     cell(memory(ours, "peak_rss_bytes"), "{:.0f}"), cell(memory(theirs, "peak_rss_bytes"), "{:.0f}")]
            for side in (ours, theirs):
                cells.append(f"{median(memory(side, 'activation_peak_bytes')):.1f} / "
                             f"{median(memory(side, 'activation_kept_bytes')):.1f}")
            print("| " + " | ".join(cells) + " |")


def verdict(ok):
    return "met" if ok else "missed"


def paired(runs, a, b, figure):
    """figure(a's run) / figure(b's run) for each round (runs of one round are minutes apart), and their median."""
    ratios = [figure(x) / figure(y) for x, y in zip(runs[a], runs[b])]
    return median(ratios), ", ".join(f"{r:.2f}" for r in ratios)


def goals(runs):
    def rate(r):
        return r["on"]["samples_per_s_mean"]

    print("goals (ratios paired within each round, median of the rounds; the rounds' ratios in brackets):")
    own, rounds = paired(runs, ("bf16", True, 2), ("fp32", True, 2), rate)
    one, one_rounds = paired(runs, ("bf16", True, 1), ("fp32", True, 1), rate)
    print(f"- bf16 >= 2x hpctrain's fp32 samples/s at 2 ranks: {own:.2f}x [{rounds}], {verdict(own >= 2)} "
          f"(1 rank: {one:.2f}x [{one_rounds}])")
    peer, rounds = paired(runs, ("bf16", True, 2), ("bf16", False, 2), rate)
    print(f"- bf16 >= 1.1x PyTorch DDP with autocast bf16 at 2 ranks: {peer:.2f}x [{rounds}], {verdict(peer >= 1.1)}")
    off, on = ("seq512-ckpt-off", True, 1), ("seq512-ckpt-on", True, 1)
    kept, _ = paired(runs, on, off, lambda r: r["memory"]["activation_peak_bytes"])
    slower, rounds = paired(runs, on, off, lambda r: r["on"]["mean_s"])
    print(f"- checkpointing at seq 512, batch 16 (fp32, 1 rank): activation peak "
          f"{median(memory(runs[off], 'activation_peak_bytes')):.0f} -> {median(memory(runs[on], 'activation_peak_bytes')):.0f}"
          f" MiB ({1 - kept:.0%} lower, goal >= 40 %), step time x{slower:.2f} [{rounds}] (goal <= x1.35): "
          f"{verdict(kept <= 0.6 and slower <= 1.35)}")
    blas, rounds = paired(runs, ("blas-fixed", True, 1), ("blas-Prescott", True, 1), rate)
    print(f"- fp32 with the BLAS fix against forced Prescott kernels (1 rank): {blas:.2f}x [{rounds}], goal >= 2.5x: "
          f"{verdict(blas >= 2.5)}")


def main():
    runs = load(sys.argv[1])
    rounds = max(len(v) for v in runs.values())
    print(f"samples/s from the mean step; median of {rounds} interleaved rounds (min-max); memory per rank, "
          "the largest rank's")
    table(runs, sys.argv[2:])
    goals(runs)


if __name__ == "__main__":
    main()
