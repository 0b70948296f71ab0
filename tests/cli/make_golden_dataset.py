#!/usr/bin/python3
"""Writes an hpctrain dataset file (schema v1, with h5py as a Python user would) holding the inputs of the
golden-logit cases of one tiny checkpoint (tests/models/golden/golden.json), and the expected logits beside it.

usage: make_golden_dataset.py GOLDEN_JSON CHECKPOINT_NAME OUT.h5 OUT_EXPECTED.json
Each row of each case becomes one example (its unpadded tokens); labels cycle 0, 1, 2.
"""
import json
import sys

import h5py
import numpy as np

golden_path, name, out_h5, out_expected = sys.argv[1:5]
cases = json.load(open(golden_path))["checkpoints"][name]["cases"]
ids, offsets, types, logits = [], [0], [], []
pairs = any("token_type_ids" in c for c in cases)
for case in cases:
    for r, row in enumerate(case["input_ids"]):
        mask = case.get("attention_mask", [[1] * len(row)] * len(case["input_ids"]))[r]
        n = int(sum(mask))
        assert all(m == 1 for m in mask[:n]) and all(m == 0 for m in mask[n:]), "padding must be at the end"
        ids += row[:n]
        offsets.append(len(ids))
        if pairs:
            types += (case["token_type_ids"][r] if "token_type_ids" in case else [0] * len(row))[:n]
        logits.append(case["logits"][r])
num = len(offsets) - 1
with h5py.File(out_h5, "w") as f:
    f.attrs["hpctrain_format"] = 1
    f.attrs["task"] = "text-classification"
    f.attrs["label_names"] = json.dumps(["negative", "neutral", "positive"])
    f.attrs["source"] = "golden " + name
    f.attrs["created_by"] = "tests/cli/make_golden_dataset.py"
    f.attrs["tokenizer"] = json.dumps({"type": "wordpiece", "vocab_size": 100, "max_length": 32})
    g = f.create_group("validation")
    g.attrs["num_examples"] = np.int64(num)
    g["input_ids"] = np.array(ids, dtype=np.int32)
    g["offsets"] = np.array(offsets, dtype=np.int64)
    if pairs:
        g["token_type_ids"] = np.array(types, dtype=np.uint8)
    g["labels"] = np.arange(num, dtype=np.int64) % 3
    g["source_index"] = np.arange(num, dtype=np.int64) + 100
json.dump(logits, open(out_expected, "w"))
