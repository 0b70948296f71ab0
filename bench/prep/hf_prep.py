"""The Hugging Face peer of `hpctrain prep text`: datasets.load_dataset(json) -> map(tokenizer, batched=True,
num_proc=N) writing Arrow cache files, with bert-base-uncased WordPiece (lower-casing), truncation to max_length.
Prints one line: examples and tokens written."""
import argparse
import os

import datasets
import pyarrow.compute as pc
from tokenizers.implementations import BertWordPieceTokenizer

parser = argparse.ArgumentParser()
parser.add_argument("--input", required=True)
parser.add_argument("--vocab", required=True)
parser.add_argument("--cache", required=True)
parser.add_argument("--num-proc", type=int, default=1)
parser.add_argument("--max-length", type=int, default=512)
args = parser.parse_args()

tokenizer = BertWordPieceTokenizer(args.vocab, lowercase=True)
tokenizer.enable_truncation(args.max_length)


def encode(batch):
    encodings = tokenizer.encode_batch(batch["text"])
    return {"input_ids": [e.ids for e in encodings]}


rows = datasets.load_dataset("json", data_files=args.input, split="train", cache_dir=args.cache)
mapped = rows.map(encode, batched=True, num_proc=args.num_proc if args.num_proc > 1 else None,
                  remove_columns=["text"], cache_file_name=os.path.join(args.cache, "tokenized.arrow"))
# Counted in Arrow (list lengths), not through Python lists, so that the count costs the peer no time of its own.
tokens = pc.sum(pc.list_value_length(mapped.data.column("input_ids"))).as_py()
print(f"hf: {len(mapped)} examples, {tokens} tokens")
