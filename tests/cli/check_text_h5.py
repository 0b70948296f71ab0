#!/usr/bin/env python3
"""Reads an hpctrain text dataset with h5py (as a Python user would) and checks schema v1 invariants.

usage: check_text_h5.py FILE.h5 EXPECTED_TRAIN EXPECTED_VALIDATION LABELS_COMMA_SEPARATED
Prints one line per failed check and exits 1 if any failed.
"""
import json
import sys

import h5py
import numpy as np

path, n_train, n_val, labels = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4].split(",")
problems = []


def check(cond, message):
    if not cond:
        problems.append(message)


with h5py.File(path, "r") as f:
    attrs = f.attrs
    check(int(attrs["hpctrain_format"]) == 1, "hpctrain_format != 1")
    for key in ("task", "label_names", "source", "created_by", "tokenizer"):
        check(isinstance(attrs[key], str), f"attribute {key} is {type(attrs[key]).__name__}, not str")
    check(attrs["task"] == "text-classification", f"task = {attrs['task']}")
    check(json.loads(attrs["label_names"]) == labels, f"label_names = {attrs['label_names']}")
    tokenizer = json.loads(attrs["tokenizer"])
    check(tokenizer.get("vocab_size") == 30522, f"tokenizer vocab_size = {tokenizer.get('vocab_size')}")
    check("vocab_sha256" in tokenizer, "tokenizer has no vocab_sha256")
    for split, expected in (("train", n_train), ("validation", n_val)):
        g = f[split]
        n = int(g.attrs["num_examples"])
        check(n == expected, f"{split}: num_examples {n}, expected {expected}")
        ids, offsets, labels_ds = g["input_ids"], g["offsets"], g["labels"]
        check(ids.dtype == np.int32, f"{split}/input_ids dtype {ids.dtype}")
        check(offsets.dtype == np.int64 and offsets.shape == (n + 1,), f"{split}/offsets {offsets.dtype} {offsets.shape}")
        check(labels_ds.dtype == np.int64 and labels_ds.shape == (n,), f"{split}/labels {labels_ds.dtype} {labels_ds.shape}")
        check(g["source_index"].shape == (n,), f"{split}/source_index shape")
        off = offsets[:]
        check(off[0] == 0 and off[-1] == ids.shape[0] and np.all(np.diff(off) > 0), f"{split}: offsets not monotone from 0 to T")
        all_ids = ids[:]
        starts, ends = off[:-1], off[1:] - 1
        check(np.all(all_ids[starts] == 101), f"{split}: an example does not start with [CLS]")
        check(np.all(all_ids[ends] == 102), f"{split}: an example does not end with [SEP]")
        check(np.all((labels_ds[:] >= 0) & (labels_ds[:] < len(labels))), f"{split}: label out of range")

for p in problems:
    print("check_text_h5:", p)
sys.exit(1 if problems else 0)
