"""The table of bench/loss/run.sh: per implementation, peak RSS and step time (median over the rounds, min-max), and
the ratios against issue 34's goals (chunked peak RSS <= 0.5x the peer's and <= 0.6x unchunked's; chunked step time
<= 1.05x unchunked's), each ratio per round (the runs of one round ran back to back) and their median.
Usage: summary.py RESULTS.jsonl     (one run a line, as run.sh writes them)
       summary.py --progress FILE   (one line per run; FILE - for stdin)
"""
import json
import sys
from statistics import median

NAMES = {"chunked": "hpctrain, chunked loss", "unchunked": "hpctrain, --loss-chunk-tokens 0",
         "peer": "transformers + torch"}


def step_time(run):
    return median(run["step_s"])


def cell(values, fmt):
    text = fmt.format(median(values))
    return text if len(values) < 2 else f"{text} ({fmt.format(min(values))}-{fmt.format(max(values))})"


def main():
    if sys.argv[1] == "--progress":
        for r in map(json.loads, sys.stdin if sys.argv[2] == "-" else open(sys.argv[2])):
            print(f"  {r['impl']:9} round {r['round']}: peak RSS {r['peak_rss_kib'] / 1048576:.2f} GiB, step "
                  f"{step_time(r):.1f} s, run CPU {r['cpu_s']:.0f} s", flush=True)
        return
    runs = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
    by = {}
    for r in runs:
        by.setdefault(r["impl"], {})[r["round"]] = r
    print("| implementation | peak RSS GiB (min-max) | step s (min-max) | run CPU s (min-max) |")
    print("|---|---:|---:|---:|")
    for impl in ("chunked", "unchunked", "peer"):
        if impl in by:
            rs = list(by[impl].values())
            print(f"| {NAMES[impl]} | {cell([r['peak_rss_kib'] / 1048576 for r in rs], '{:.2f}')} | "
                  f"{cell([step_time(r) for r in rs], '{:.1f}')} | {cell([r['cpu_s'] for r in rs], '{:.0f}')} |")
    print()
    goals = [("peak RSS, chunked / peer", "peer", "peak_rss_kib", 0.5),
             ("peak RSS, chunked / unchunked", "unchunked", "peak_rss_kib", 0.6),
             ("step time, chunked / unchunked", "unchunked", "step", 1.05),
             ("run CPU time, chunked / unchunked", "unchunked", "cpu_s", 1.05)]
    print("| ratio | goal | per round | median | met |")
    print("|---|---:|---|---:|---|")
    for name, other, key, goal in goals:
        rounds = sorted(set(by.get("chunked", {})) & set(by.get(other, {})))
        if not rounds:
            continue
        value = (lambda r: step_time(r)) if key == "step" else (lambda r: r[key])
        ratios = [value(by["chunked"][n]) / value(by[other][n]) for n in rounds]
        print(f"| {name} | <= {goal} | {', '.join(f'{x:.2f}' for x in ratios)} | {median(ratios):.2f} | "
              f"{'yes' if median(ratios) <= goal else 'no'} |")


if __name__ == "__main__":
    main()
