"""The table of bench/zero/run.sh: per model, ranks and ZeRO stage, the median step time, comm_bytes per step,
optimizer_state_bytes and the largest rank's peak RSS, each with its ratio to the same round's stage 0 (median over
the rounds, min-max), the estimate-memory total and the saving against stage 0 it predicts beside the measured one,
and issue 23's goals at 2 ranks (state <= 0.55x, bytes <= 1x, step time within 5 %).
Usage: summary.py RESULTS.jsonl                      (one run a line, as run.sh writes them)
       summary.py --progress FILE                    (one line per run: run.sh's progress; FILE - for stdin)
       summary.py --record METRICS ESTIMATE WARMUP MODEL RANKS STAGE ROUND RSS...
                                                     (one run's result line, from its metrics.jsonl, estimate-memory
                                                      --json and one GNU time %M file per rank, KiB)
"""
import json
import sys
from statistics import median

MIB = 2 ** 20


def record(metrics, estimate, warmup, model, ranks, stage, round_, *rss_files):
    lines = [e for e in map(json.loads, open(metrics)) if "comm_bytes" in e]
    timed = [e for e in lines if e["step"] > int(warmup)]
    if not timed:
        sys.exit(f"summary.py: {metrics} has no training line after step {warmup}")
    states = {e.get("optimizer_state_bytes") for e in lines}
    if None in states or len(states) != 1:
        sys.exit(f"summary.py: {metrics}: optimizer_state_bytes missing or changing: {sorted(map(str, states))}")
    rss = [int(open(f).read().split()[-1]) * 1024 for f in sorted(rss_files)]
    if len(rss) != int(ranks):
        sys.exit(f"summary.py: {len(rss)} peak RSS files for {ranks} ranks")
    est = json.load(open(estimate))
    print(json.dumps({"model": model, "ranks": int(ranks), "stage": int(stage), "round": int(round_),
                      "steps": len(timed), "step_s": median(e["time"]["step"] for e in timed),
                      "comm_bytes_per_step": sum(e["comm_bytes"] for e in timed) / len(timed),
                      "optimizer_state_bytes": states.pop(), "peak_rss_bytes": rss,
                      "estimate_total_bytes": est["bytes"]["total"], "final_loss": timed[-1]["loss"]}))


def progress(lines):
    for r in map(json.loads, lines):
        print(f"  {r['model']:10} {r['ranks']} rank(s) stage {r['stage']}: step {r['step_s']:.3f} s, "
              f"{r['comm_bytes_per_step'] / MIB:.1f} MiB sent/step, state {r['optimizer_state_bytes'] / MIB:.1f} MiB, "
              f"peak RSS {' / '.join(f'{b / MIB:.0f}' for b in r['peak_rss_bytes'])} MiB", flush=True)


def cell(values, fmt="{:.2f}"):
    """The median, then (min-max) when there are several."""
    text = fmt.format(median(values))
    return text if len(values) < 2 else f"{text} ({fmt.format(min(values))}-{fmt.format(max(values))})"


def ratio(runs, base, key):
    """Per round: this run's value over stage 0's of the same round (the largest rank's peak RSS)."""
    pick = (lambda r: max(r[key])) if key == "peak_rss_bytes" else (lambda r: r[key])
    return [pick(r) / pick(base[r["round"]]) for r in runs if r["round"] in base and pick(base[r["round"]]) > 0]


def goals(runs, base):
    """Issue 23's goals for a 2-rank stage > 0 row, as text."""
    met = [("state <= 0.55x", ratio(runs, base, "optimizer_state_bytes"), lambda x: x <= 0.55),
           ("bytes <= 1x", ratio(runs, base, "comm_bytes_per_step"), lambda x: x <= 1.0),
           ("step within 5 %", ratio(runs, base, "step_s"), lambda x: x <= 1.05)]
    return ", ".join(f"{name}: {'met' if values and ok(median(values)) else 'missed'}" for name, values, ok in met)


def table(runs):
    print("| model | ranks | stage | step s | vs stage 0 | comm MiB/step | vs 0 | optimizer state MiB | vs 0 | "
          "peak RSS MiB (largest rank) | vs 0 | saving vs 0, measured / estimated MiB | goals (2 ranks) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for model, ranks, stage in sorted({(r["model"], r["ranks"], r["stage"]) for r in runs}):
        rows = [r for r in runs if (r["model"], r["ranks"], r["stage"]) == (model, ranks, stage)]
        base = {r["round"]: r for r in runs if (r["model"], r["ranks"], r["stage"]) == (model, ranks, 0)}
        measured = [(max(base[r["round"]]["peak_rss_bytes"]) - max(r["peak_rss_bytes"])) / MIB for r in rows
                    if r["round"] in base]
        estimated = (base[rows[0]["round"]]["estimate_total_bytes"] - rows[0]["estimate_total_bytes"]) / MIB \
            if rows[0]["round"] in base else float("nan")
        print(f"| {model} | {ranks} | {stage} | {cell([r['step_s'] for r in rows], '{:.3f}')} | "
              f"{cell(ratio(rows, base, 'step_s'))} | {cell([r['comm_bytes_per_step'] / MIB for r in rows], '{:.1f}')} | "
              f"{cell(ratio(rows, base, 'comm_bytes_per_step'))} | "
              f"{cell([r['optimizer_state_bytes'] / MIB for r in rows], '{:.1f}')} | "
              f"{cell(ratio(rows, base, 'optimizer_state_bytes'))} | "
              f"{cell([max(r['peak_rss_bytes']) / MIB for r in rows], '{:.0f}')} | "
              f"{cell(ratio(rows, base, 'peak_rss_bytes'))} | {cell(measured, '{:.0f}') if measured else '-'} / "
              f"{estimated:.0f} | {goals(rows, base) if ranks == 2 and stage > 0 else ''} |")


def main():
    if sys.argv[1] == "--record":
        record(*sys.argv[2:])
    elif sys.argv[1] == "--progress":
        progress(sys.stdin if sys.argv[2] == "-" else open(sys.argv[2]))
    else:
        table([json.loads(line) for line in open(sys.argv[1]) if line.strip()])


if __name__ == "__main__":
    main()
