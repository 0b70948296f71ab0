#!/usr/bin/env python3
"""Reference ids for `hpctrain prep lm`, from Hugging Face tokenizers (independent of hpctrain's tokenizer).

Writes lm_documents.json next to this script:
  {"generated_by": {...}, "documents": [text, ...],
   "ids": {"gpt2": [[id, ...], ...], "llama3": [...]}}
where ids[name][d] is document d's ids as prep lm defines them: AutoTokenizer(dir)(text)["input_ids"] (special
tokens included: Llama-3's BOS), then the tokenizer_config.json eos_token's id unless it is already last. The
tokenizer folders are the byte-level BPE goldens of tests/tokenize/golden/bpe/.

Usage: /path/to/venv/bin/python generate_lm_goldens.py   (needs: pip install tokenizers transformers)
"""
import json
import os
import random

import tokenizers
import transformers

HERE = os.path.dirname(os.path.abspath(__file__))
BPE = os.path.join(HERE, "..", "..", "tokenize", "golden", "bpe")
NAMES = ["gpt2", "llama3"]


def documents():
    docs = [
        "The quick brown fox jumps over the lazy dog.",
        "Hello, world! It's a \"quoted\" phrase, with commas.",
        "Ünïcödé text: 数字 123, emoji 🎉 and Ελληνικά.",
        "A line\nand another line\n\nafter a blank one.",
        "ends with the gpt2 end of text<|endoftext|>",
        "ends with the llama3 end of turn<|eot_id|>",
        "  leading and trailing spaces  ",
        "tabs\tin\tthe\ttext",
        "x",
    ]
    rng = random.Random(21)
    words = ["data", "parallel", "training", "of", "neural", "networks", "on", "many", "ranks", "tokens", "rows",
             "blocks", "the", "a", "and", "42", "3.14", "don't", "we'll", "MPI", "HDF5"]
    for i in range(40):
        docs.append(f"Document {i}: " + " ".join(rng.choice(words) for _ in range(rng.randint(1, 60))) + ".")
    return docs


def main():
    docs = documents()
    ids = {}
    for name in NAMES:
        folder = os.path.join(BPE, name)
        tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
        with open(os.path.join(folder, "tokenizer_config.json")) as f:
            eos = tokenizer.convert_tokens_to_ids(json.load(f)["eos_token"])
        ids[name] = []
        for text in docs:
            document = tokenizer(text)["input_ids"]
            if not document or document[-1] != eos:
                document.append(eos)
            ids[name].append(document)
    out = {"generated_by": {"tokenizers": tokenizers.__version__, "transformers": transformers.__version__},
           "documents": docs, "ids": ids}
    with open(os.path.join(HERE, "lm_documents.json"), "w") as f:
        json.dump(out, f, ensure_ascii=False, separators=(",", ":"))
        f.write("\n")


if __name__ == "__main__":
    main()
