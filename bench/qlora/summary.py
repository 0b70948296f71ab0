"""Prints bench/qlora/run.sh's table from its JSON-lines results: memory (model bytes, measured step peak, their
ratios) and speed (median seconds per step per round, min-max over rounds, the peer / hpctrain ratio)."""
import json
import statistics
import sys

rows = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
memory = {}
for r in rows:
    if r.get("part") == "memory":
        memory.setdefault(r.get("step_args", ""), {})[r["side"]] = r
for step_args, sides in memory.items():
    if "lora" not in sides:
        continue
    lora = sides["lora"]
    bf16_base = 2 * lora["parameters"]
    held_bf16 = lora["step_peak"] - lora["model_bytes"] + bf16_base  # the LoRA step with the base held in bf16
    print(f"memory ({lora['parameters']:,} parameters, LoRA r 16 all-linear, one step{', ' + step_args if step_args else ''}):")
    names = (("lora", "LoRA (float32 base)"), ("qlora", "QLoRA (nf4 base)"),
             ("qlora-embeddings", "QLoRA + embeddings"))
    for side, name in names:
        if side in sides:
            r = sides[side]
            print(f"  {name:<22} model {r['model_bytes'] / 2**20:8.1f} MiB   step peak {r['step_peak'] / 2**20:8.1f} MiB   "
                  f"estimate {r['estimate'] / 2**20:8.1f} MiB")
    print(f"  bf16 base {bf16_base / 2**20:.1f} MiB; a LoRA step holding the base in bf16 (computed: the float32 "
          f"step's peak less its model plus the bf16 base) {held_bf16 / 2**20:.1f} MiB")
    for side, name in names[1:]:
        if side in sides:
            r = sides[side]
            print(f"  {name}: model / bf16 base {r['model_bytes'] / bf16_base:.3f}; step peak / LoRA step's "
                  f"{r['step_peak'] / lora['step_peak']:.3f}; / the bf16-held LoRA step's {r['step_peak'] / held_bf16:.3f}")
speed = [r for r in rows if r.get("part") == "speed"]
if speed:
    per_round = {}
    for r in speed:
        per_round.setdefault(r["side"], []).append(statistics.median(r["step_seconds"]))
    for side, values in per_round.items():
        print(f"speed {side:<9} s/step median {statistics.median(values):.3f} (rounds: min {min(values):.3f}, max "
              f"{max(values):.3f}, n {len(values)})")
    if {"hpctrain", "peer"} <= per_round.keys():
        ratios = [p / h for p, h in zip(per_round["peer"], per_round["hpctrain"])]
        print(f"  peer / hpctrain time per step: median {statistics.median(ratios):.2f} (min {min(ratios):.2f}, "
              f"max {max(ratios):.2f}) over {len(ratios)} rounds")
