"""test_zero3_bytes.sh's checks of --zero-stage 3's comm_bytes against docs/zero.md's formula ("Bytes on the wire
(stage 3)") and of model_state_bytes, from the runs' metrics.jsonl (stdlib + numpy).

usage: zero3_bytes.py untied WEIGHTS B0 B3 B3K M0 M3  DistilBERT on 2 ranks: every unit gathered twice per micro-batch
                                                      with resharding (B3), once without (B3K); model_state_bytes at
                                                      4 ranks (M3) <= 0.30x stage 0's (M0)
       zero3_bytes.py tied WEIGHTS B0 B3 B3K LOG3    GPT-2 (tied head) on 2 ranks: the embeddings' unit once per
                                                      micro-batch either way, the layers twice with resharding
WEIGHTS: the stage-0 run's final/model.safetensors (the parameters' sizes); B*: metrics.jsonl of runs of one micro-batch
per step at stage 0, stage 3 and stage 3 without resharding; LOG3: the stage-3 run's log (its units line).
Both: reduce-scatter 4 N / 2 + gathers x 4 N / W + norm 8 + late-gradient flags 4 (B - 1) + the step's other
collectives, which stage 0's one bucket (no flags) gives as its comm_bytes minus 4 N.
"""
import os
import re
import sys
import json

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare_weights  # noqa: E402


def lines(path):
    return [e for e in map(json.loads, open(path)) if "loss" in e]


def comm(paths):
    return ([e["comm_bytes"] for e in lines(p)] for p in paths)


def untied(tensors, b0, b3, b3k, m0_path, m3_path):
    def unit(name):  # Note [Unit gathers]: the DistilBERT fixture's units
        m = re.match(r"distilbert\.transformer\.layer\.(\d+)\.", name)
        return f"layer {m.group(1)}" if m else "embeddings" if name.startswith("distilbert.embeddings.") else "head"
    numels = {}
    for name, t in tensors.items():
        assert t.size < 4096, name  # alignment 1 (optim::any_segment_alignment): a unit pads to a multiple of 2 ranks
        numels[unit(name)] = numels.get(unit(name), 0) + t.size
    padded = sum(-(-n // 2) * 2 for n in numels.values())
    other = b0[0] - 4 * sum(numels.values())
    def expected(gathers):
        return 2 * padded + gathers * 2 * padded + 8 + 4 * (len(numels) - 1) + other
    print(f"units {numels}, padded {padded}; stage 0 {b0}, stage 3 {b3} (expected {expected(2)}), "
          f"without resharding {b3k} (expected {expected(1)}); ratios {b3[0] / b0[0]:.4f}, {b3k[0] / b0[0]:.4f}")
    ok = all(x == expected(2) for x in b3) and all(x == expected(1) for x in b3k)
    ok = ok and max(b3) <= 1.55 * min(b0) and max(b3k) <= 1.05 * min(b0)
    m0, m3 = ({e["model_state_bytes"] for e in lines(p)} for p in (m0_path, m3_path))
    print(f"model_state_bytes on 4 ranks: stage 0 {m0}, stage 3 {m3}")
    return ok and len(m0) == 1 and len(m3) == 1 and max(m3) <= 0.30 * min(m0)


def tied(tensors, b0, b3, b3k, log3):
    units, _, gathered = re.search(r"ZeRO stage 3: (\d+) units; this rank keeps (\d+) of (\d+) parameter bytes",
                                   open(log3).read()).groups()
    padded, units = int(gathered) // 4, int(units)  # every unit's buffer, padded (4-byte elements)
    layers = sum(t.size for name, t in tensors.items() if name.startswith("transformer.h."))
    total = sum(t.size for name, t in tensors.items() if name != "lm_head.weight")  # the head is the embeddings
    other = b0[0] - 4 * total
    # Without resharding every unit once; with it the layers twice (forward and backward), the embeddings (kept from
    # their forward to the end of backward) and `rest` still once. The layers' padding: at most 256 elements (the
    # segment alignment) per parameter and rank.
    expected_keep = 2 * padded + 2 * padded + 8 + 4 * (units - 1) + other
    extra = [x - expected_keep for x in b3]
    print(f"{units} units, {padded} padded elements ({total} real, layers {layers}); stage 0 {b0}, stage 3 {b3} "
          f"(layers' second gathers {extra}), without resharding {b3k} (expected {expected_keep}); "
          f"ratios {b3[0] / b0[0]:.4f}, {b3k[0] / b0[0]:.4f}")
    ok = all(x == expected_keep for x in b3k) and all(2 * layers <= e <= 2 * layers + 2 * 8 * 256 for e in extra)
    return ok and max(b3) <= 1.55 * min(b0) and max(b3k) <= 1.05 * min(b0)


def main():
    kind, weights = sys.argv[1], sys.argv[2]
    _, tensors = compare_weights.read(weights)
    b0, b3, b3k = comm(sys.argv[3:6])
    ok = untied(tensors, b0, b3, b3k, *sys.argv[6:8]) if kind == "untied" else tied(tensors, b0, b3, b3k, sys.argv[6])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
