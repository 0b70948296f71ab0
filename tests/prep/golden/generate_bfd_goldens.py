#!/usr/bin/env python3
"""Reference rows for `prep lm --packing bfd` and `bfd_split` (Note [Best-fit-decreasing rows]), from TRL.

Writes bfd_rows.json next to this script:
  {"generated_by": {...}, "cases": [{"capacity": C, "split": bool, "lengths": [n, ...],
                                     "rows": [[[document, first, count], ...], ...]}, ...]}
where rows are TRL's packed examples in its order (before hpctrain's seeded shuffle of the rows) and each row lists
its sequences in order as (document, first token in the document, tokens). TRL packs one `datasets.map` batch at a
time; prep lm packs a whole split at once, which is TRL with map_kwargs={"batch_size": None}.

Usage: /path/to/venv/bin/python generate_bfd_goldens.py   (needs: pip install trl datasets)
"""
import json
import os
import random

import datasets
import trl
from trl.data_utils import pack_dataset

HERE = os.path.dirname(os.path.abspath(__file__))


def pack(lengths, capacity, split):
    # Token t of document d is d * 100000 + t: every token names its document and place.
    ids = [[d * 100000 + t for t in range(n)] for d, n in enumerate(lengths)]
    dataset = datasets.Dataset.from_dict({"input_ids": ids})
    packed = pack_dataset(dataset, capacity, strategy="bfd_split" if split else "bfd", map_kwargs={"batch_size": None})
    rows = []
    for example in packed:
        row, at = [], 0
        for count in example["seq_lengths"]:
            first = example["input_ids"][at]
            row.append([first // 100000, first % 100000, count])
            at += count
        assert at == len(example["input_ids"]) <= capacity
        rows.append(row)
    return rows


def cases():
    rng = random.Random(33)
    out = []
    # TRL's docstring example, then ties (few distinct lengths), a long tail like the fortunes, documents longer
    # than a row, and rows of 1 and 2 tokens.
    specs = [([5, 2, 3, 1], 4), ([rng.choice([1, 2, 3, 5, 8]) for _ in range(60)], 8),
             ([max(1, int(rng.lognormvariate(3.2, 0.9))) for _ in range(400)], 128),
             ([rng.randint(1, 40) for _ in range(200)], 32), ([1, 1, 1, 2, 1], 2), ([3, 1, 2], 1)]
    for lengths, capacity in specs:
        for split in (False, True):
            out.append({"capacity": capacity, "split": split, "lengths": lengths, "rows": pack(lengths, capacity, split)})
    return out


def main():
    golden = {"generated_by": {"script": os.path.basename(__file__), "trl": trl.__version__,
                               "datasets": datasets.__version__},
              "cases": cases()}
    with open(os.path.join(HERE, "bfd_rows.json"), "w") as f:
        json.dump(golden, f, separators=(",", ":"))
        f.write("\n")


if __name__ == "__main__":
    main()
