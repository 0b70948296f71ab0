"""Checks a --timeline trace (test_timeline.sh): python3 check_timeline.py TRACE.json METRICS.jsonl STEPS MICRO."""
import json
import sys
from collections import defaultdict

trace_path, metrics_path, steps, micro = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
trace = json.load(open(trace_path))
events = trace["traceEvents"]
failures = []


def check(condition, message):
    if not condition:
        failures.append(message)


other = trace["otherData"]
check(other["capped"] is False and other["dropped_events_per_rank"] == [0, 0], f"capped: {other}")
check(all(abs(o) < 5e6 for o in other["clock_offset_ns_per_rank"]), f"offsets on one host: {other}")
processes = {e["pid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
check(processes == {0: "rank 0", 1: "rank 1"}, f"processes: {processes}")
threads = defaultdict(dict)  # pid -> tid -> name
for e in events:
    if e["ph"] == "M" and e["name"] == "thread_name":
        threads[e["pid"]][e["tid"]] = e["args"]["name"]
spans = [e for e in events if e["ph"] == "X"]
check(all(e["dur"] >= 0 for e in spans), "negative durations")


def on(rank, name, thread=None):
    return [e for e in spans if e["pid"] == rank and e["name"] == name and
            (thread is None or threads[rank].get(e["tid"]) == thread)]


def inside(inner, outer, slack=1.0):  # microseconds (timestamps are rounded to ns / 1e3)
    return outer["ts"] - slack <= inner["ts"] and inner["ts"] + inner["dur"] <= outer["ts"] + outer["dur"] + slack


step_starts = defaultdict(dict)
for rank in (0, 1):
    check(set(threads[rank].values()) >= {"main", "communication", "loader"}, f"rank {rank} threads: {threads[rank]}")
    check(on(rank, "load batch", "loader"), f"rank {rank}: no loader spans")
    step_spans = {e["args"]["n"]: e for e in on(rank, "step", "main")}
    check(sorted(step_spans) == list(range(1, steps + 1)), f"rank {rank} steps: {sorted(step_spans)}")
    for n, step in step_spans.items():
        step_starts[n][rank] = step
        for phase, count in (("data wait", micro), ("forward", micro), ("backward", micro), ("optimizer", 1)):
            found = [e for e in on(rank, phase, "main") if inside(e, step)]
            check(len(found) == count, f"rank {rank} step {n}: {len(found)} '{phase}' spans, expected {count}")
        backward = [e for e in on(rank, "backward", "main") if inside(e, step)]
        syncs = [e for e in on(rank, "gradient sync", "main") if inside(e, step)]
        check(len(syncs) == 1 and any(inside(syncs[0], b) for b in backward), f"rank {rank} step {n}: gradient sync")
        reduced = [e for e in on(rank, "allreduce", "communication") if inside(e, step)]
        check(len(reduced) >= 1, f"rank {rank} step {n}: no bucket allreduce on the communication thread")
    for phase in ("checkpoint", "evaluation"):
        found = sorted(e["args"]["n"] for e in on(rank, phase, "main"))
        check(found[:2] == [2, 4], f"rank {rank}: {phase} spans at steps {found}, expected 2 and 4")
    training = on(rank, "training", "main")
    check(len(training) == 1 and all(inside(s, training[0]) for s in step_spans.values()), f"rank {rank}: training")

# Aligned clocks: each step holds collectives both ranks are in at once, so its intervals overlap.
for n, pair in step_starts.items():
    a, b = pair.get(0), pair.get(1)
    if a and b:
        check(a["ts"] < b["ts"] + b["dur"] and b["ts"] < a["ts"] + a["dur"], f"step {n}: the ranks' steps do not overlap")
        check(abs(a["ts"] - b["ts"]) < 1e6, f"step {n}: starts {a['ts']} and {b['ts']} us apart by over 1 s")

# metrics.jsonl (rank 0, --logging-steps 1) reports the same spans: Note [Step spans].
lines = [json.loads(line) for line in open(metrics_path) if '"time"' in line]
check(len(lines) == steps, f"{len(lines)} metrics lines with times")
for line in lines:
    step = step_starts[line["step"]][0]
    t = line["time"]
    within = lambda name: sum(e["dur"] for e in on(0, name, "main") if inside(e, step)) / 1e6
    pairs = {"step": step["dur"] / 1e6, "forward": within("forward"), "data_wait": within("data wait"),
             "optimizer": within("optimizer"),
             "backward": within("backward") - within("gradient sync")}
    for key, seconds in pairs.items():
        check(abs(t[key] - seconds) < 1e-5, f"step {line['step']}: metrics {key} {t[key]} vs timeline {seconds}")
    check(t["exposed_communication"] >= within("gradient sync") - 1e-5, f"step {line['step']}: exposed communication")

for failure in failures:
    print("FAILED:", failure)
print(f"{len(spans)} spans checked, {len(failures)} failure(s)")
sys.exit(1 if failures else 0)
