#!/usr/bin/env python3
"""Checks an `hpctrain prep lm` file with h5py against reference ids made by Hugging Face tokenizers.

usage: check_lm_h5.py FILE.h5 GOLDEN.json TOKENIZER group|none|bfd|bfd_split LENGTH [FIRST_FILE_DOCUMENTS]
GOLDEN.json: tests/prep/golden/lm_documents.json; its documents were the inputs in order, the first
FIRST_FILE_DOCUMENTS (default: all) in one input file and the rest in a second one (source_index counts rows in
each file). group: the concatenated documents cut into rows of LENGTH tokens, the remainder dropped, each row with
the row of the document of its first token; none: one row per document, its first LENGTH ids. The rows of every
split together must be exactly those (in any order: the file is shuffled). bfd: rows of at most LENGTH tokens whose
documents (split at document_start) are each document's first LENGTH ids; bfd_split: the same with every document
cut into pieces of LENGTH ids; each row names the row of its first document. Prints each failed check; exit 1 if any.
"""
import collections
import json
import sys

import h5py
import numpy as np

path, golden_path, name, mode, length = sys.argv[1:6]
length = int(length)
golden = json.load(open(golden_path))
documents = golden["ids"][name]
first_file = int(sys.argv[6]) if len(sys.argv) > 6 else len(documents)
source_row = [d if d < first_file else d - first_file for d in range(len(documents))]
problems = []


def check(cond, message):
    if not cond:
        problems.append(message)


def expected_rows():
    rows = collections.Counter()
    if mode in ("bfd", "bfd_split"):
        for d, ids in enumerate(documents):
            pieces = [ids[at:at + length] for at in range(0, len(ids), length)]
            for piece in pieces[:1] if mode == "bfd" else pieces:
                rows[tuple(piece)] += 1
        return rows
    if mode == "none":
        for d, ids in enumerate(documents):
            rows[(tuple(ids[:length]), source_row[d])] += 1
        return rows
    stream, owner = [], []
    for d, ids in enumerate(documents):
        stream += ids
        owner += [d] * len(ids)
    for at in range(0, len(stream) - length + 1, length):
        rows[(tuple(stream[at:at + length]), source_row[owner[at]])] += 1
    return rows


with h5py.File(path, "r") as f:
    check(f.attrs["task"] == "causal-lm", f"task = {f.attrs['task']}")
    check(json.loads(f.attrs["label_names"]) == [], f"label_names = {f.attrs['label_names']}")
    tokenizer = json.loads(f.attrs["tokenizer"])
    check(tokenizer.get("type") == "byte-level-bpe", f"tokenizer = {tokenizer}")
    check(tokenizer.get("max_length") == length, f"tokenizer max_length = {tokenizer.get('max_length')}")
    got = collections.Counter()
    for split in f:
        group = f[split]
        check("labels" not in group, f"{split}: has a labels dataset")
        ids, offsets, sources = group["input_ids"][:], group["offsets"][:], group["source_index"][:]
        check(group.attrs["num_examples"] == len(sources), f"{split}: num_examples")
        lengths = np.diff(offsets)
        if mode == "group":
            check((lengths == length).all(), f"{split}: row lengths {sorted(set(lengths.tolist()))}, expected {length}")
        if mode in ("bfd", "bfd_split"):
            check((lengths <= length).all(), f"{split}: row lengths up to {lengths.max()}, expected at most {length}")
            starts = group["document_start"][:]
            check(starts.dtype == np.uint8 and len(starts) == len(ids), f"{split}: document_start {starts.dtype}")
            check((starts[offsets[:-1]] == 1).all(), f"{split}: a row does not begin a document")
            cuts = np.flatnonzero(starts).tolist() + [len(ids)]
            for begin, end in zip(cuts[:-1], cuts[1:]):
                got[tuple(ids[begin:end].tolist())] += 1
            continue
        check("document_start" not in group, f"{split}: document_start in a {mode} file")
        for i in range(len(sources)):
            got[(tuple(ids[offsets[i]:offsets[i + 1]].tolist()), int(sources[i]))] += 1
    expected = expected_rows()
    check(got == expected, f"rows differ: {sum((got - expected).values())} unexpected, "
                           f"{sum((expected - got).values())} missing of {sum(expected.values())}")
for problem in problems:
    print(problem)
sys.exit(1 if problems else 0)
