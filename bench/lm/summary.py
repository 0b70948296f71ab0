"""The table of bench/lm/run.sh: per model, precision and ranks, tokens/s of hpctrain and of transformers + DDP
(median over the rounds, min-max), the ratio of each round's pair (median, min-max), the goal (>= 1.1x) met or
missed, MFU (Note [Model FLOPs] over the peak hpctrain measured for that precision, both sides alike) and peak RSS.
Usage: summary.py RESULTS.jsonl      (one run a line, as run.sh writes them)
       summary.py --progress FILE    (one line per run: run.sh's progress; FILE - for stdin)
"""
import json
import sys
from statistics import median

GOAL = 1.1


def cell(values, fmt="{:.0f}"):
    """The median, then (min-max) when there are several."""
    text = fmt.format(median(values))
    return text if len(values) < 2 else f"{text} ({fmt.format(min(values))}-{fmt.format(max(values))})"


def progress(lines):
    for r in map(json.loads, lines):
        print(f"  {r['impl']:8} {r['model']:5} {r['precision']} {r['ranks']} rank(s): {r['tokens_per_second']:7.0f} "
              f"tok/s, peak RSS {r['peak_rss_kib'] / 1024:.0f} MiB", flush=True)


def main():
    if sys.argv[1] == "--progress":
        progress(sys.stdin if sys.argv[2] == "-" else open(sys.argv[2]))
        return
    runs = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
    peak = {}  # precision -> the peaks measured (one per invocation of run.sh)
    for r in runs:
        if r["impl"] == "hpctrain" and r["peak_tflops"] not in peak.setdefault(r["precision"], []):
            peak[r["precision"]].append(r["peak_tflops"])
    peer_name = next((r["impl_name"] for r in runs if r["impl"] == "peer"), "peer")
    rows = sorted({(r["model"], r["precision"], r["ranks"]) for r in runs},
                  key=lambda k: (k[0], k[1] != "fp32", k[2]))
    print(f"peer: {peer_name}; rounds: {len({r['round'] for r in runs})}; timed steps per run: {runs[0]['steps']}; "
          f"peaks (hpctrain, measured): " + ", ".join(f"{p} " + " / ".join(f"{t * 1e3:.1f}" for t in ts) + " GFLOP/s per rank"
                                                   for p, ts in peak.items()))
    print("| model | precision | ranks | hpctrain tok/s | transformers + DDP tok/s | ratio | goal >= 1.1x "
          "| hpctrain MFU | peer MFU | hpctrain peak RSS MiB | peer peak RSS MiB |")
    print("|---|---|---:|---:|---:|---:|---|---:|---:|---:|---:|")
    missed = []
    for model, precision, ranks in rows:
        def side(impl):
            return {r["round"]: r for r in runs if (r["impl"], r["model"], r["precision"], r["ranks"]) ==
                    (impl, model, precision, ranks)}
        ours, theirs = side("hpctrain"), side("peer")
        rounds = sorted(set(ours) & set(theirs))
        if not rounds:
            continue
        ratios = [ours[k]["tokens_per_second"] / theirs[k]["tokens_per_second"] for k in rounds]

        def mfu(r, k):  # over the peak of the round's hpctrain run (an invocation measures it once per precision)
            return r["flops_per_token"] * r["tokens_per_second"] / (ours[k]["peak_tflops"] * 1e12 * ranks)
        met = min(ratios) >= GOAL
        verdict = "met" if met else ("missed (median met)" if median(ratios) >= GOAL else "missed")
        if not met:
            missed.append(f"{model} {precision} {ranks} rank(s): {median(ratios):.2f}x")
        cells = [model, precision, str(ranks), cell([ours[k]["tokens_per_second"] for k in rounds]),
                 cell([theirs[k]["tokens_per_second"] for k in rounds]), cell(ratios, "{:.2f}"), verdict,
                 f"{median(mfu(ours[k], k) for k in rounds):.1%}", f"{median(mfu(theirs[k], k) for k in rounds):.1%}",
                 cell([ours[k]["peak_rss_kib"] / 1024 for k in rounds]),
                 cell([theirs[k]["peak_rss_kib"] / 1024 for k in rounds])]
        print("| " + " | ".join(cells) + " |")
    print("goal >= 1.1x in every round of every row: " + ("met" if not missed else "missed in " + "; ".join(missed)))


if __name__ == "__main__":
    main()
