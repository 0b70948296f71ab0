"""Writes the benchmark's causal-lm file: a train split of ROWS rows of LENGTH uniformly random token ids in
[0, VOCAB), in the layout `hpctrain prep lm --block-size LENGTH` writes (docs/hdf5-format.md, task causal-lm), with h5py.

Random ids cost what text costs (the step's work does not depend on the ids). The file records no
tokenizer_json_sha256 (no tokenizer made these ids), so `hpctrain train` runs without --tokenizer and says it cannot
check one. VOCAB must not exceed the smallest model vocabulary benchmarked (32000: the Llama-style model).

Usage: python make_data.py OUTPUT.h5 [--rows 4096] [--length 128] [--vocab 32000] [--seed 0]
"""
import argparse
import json

import h5py
import numpy as np


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("output")
    parser.add_argument("--rows", type=int, default=4096)
    parser.add_argument("--length", type=int, default=128)
    parser.add_argument("--vocab", type=int, default=32000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    ids = np.random.default_rng(args.seed).integers(0, args.vocab, size=args.rows * args.length, dtype=np.int32)
    tokenizer = {"type": "byte-level-bpe", "vocab_size": args.vocab, "eos_id": 0, "bos_id": None, "packing": "group",
                 "block_size": args.length, "max_length": args.length}
    with h5py.File(args.output, "w") as f:
        f.attrs["hpctrain_format"] = np.int64(1)
        f.attrs["task"] = "causal-lm"
        f.attrs["label_names"] = "[]"
        f.attrs["source"] = f"random token ids (bench/lm/make_data.py, seed {args.seed})"
        f.attrs["created_by"] = "bench/lm/make_data.py"
        f.attrs["tokenizer"] = json.dumps(tokenizer)
        split = f.create_group("train")
        split.attrs["num_examples"] = np.int64(args.rows)
        split.create_dataset("input_ids", data=ids, chunks=(16384,), maxshape=(None,))
        offsets = np.arange(args.rows + 1, dtype=np.int64) * args.length
        split.create_dataset("offsets", data=offsets, chunks=(4096,), maxshape=(None,))
        split.create_dataset("source_index", data=np.arange(args.rows, dtype=np.int64), chunks=(4096,), maxshape=(None,))
    print(f"make_data: {args.rows} rows x {args.length} random ids < {args.vocab} in {args.output}")


if __name__ == "__main__":
    main()
