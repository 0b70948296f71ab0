#!/usr/bin/env python3
"""Trains the small byte-level BPE tokenizer shipped in data/fortunes-bpe/ (scripts/lm-example.sh's tokenizer).

GPT-2's recipe with Hugging Face `tokenizers`: the ByteLevel pre-tokenizer (GPT-2's regex, no prefix space), the
256-symbol byte alphabet, BPE merges learned up to --vocab-size ids, the special token `<|endoftext|>` (id 0, the
EOS that `hpctrain prep lm` appends to every document), the ByteLevel post-processor and decoder. The corpus is the
"text" field of a JSONL file, one document per line (scripts/fortunes_to_jsonl.py --categories all writes Debian's
`fortunes` package that way). Writes OUTPUT/tokenizer.json and OUTPUT/tokenizer_config.json (eos/bos token,
model_max_length), files that `AutoTokenizer.from_pretrained(OUTPUT)` and `hpctrain prep lm --tokenizer OUTPUT`
read. The same corpus and `tokenizers` version give the same files (the trainer is deterministic).

Usage: python make_lm_tokenizer.py --input fortunes.jsonl --output data/fortunes-bpe [--vocab-size 4096]
       [--model-max-length 1024]    (needs `pip install tokenizers`)
"""
import argparse
import json
import os

import tokenizers
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

EOS = "<|endoftext|>"


def documents(path):
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                yield json.loads(line)["text"]


def train(corpus, vocab_size):
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)  # GPT-2's regex
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=2, special_tokens=[EOS], show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator(documents(corpus), trainer=trainer)
    return tokenizer


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--input", required=True, help="JSONL with a 'text' field, one document per line")
    parser.add_argument("--output", required=True, help="folder for tokenizer.json and tokenizer_config.json")
    parser.add_argument("--vocab-size", type=int, default=4096)
    parser.add_argument("--model-max-length", type=int, default=1024)
    args = parser.parse_args()
    tokenizer = train(args.input, args.vocab_size)
    os.makedirs(args.output, exist_ok=True)
    tokenizer.save(os.path.join(args.output, "tokenizer.json"))
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": EOS, "eos_token": EOS, "unk_token": EOS,
              "model_max_length": args.model_max_length, "add_prefix_space": False,
              "clean_up_tokenization_spaces": False}
    with open(os.path.join(args.output, "tokenizer_config.json"), "w") as f:
        json.dump(config, f, indent=2)
        f.write("\n")
    print(f"make_lm_tokenizer: {tokenizer.get_vocab_size()} ids (tokenizers {tokenizers.__version__}) "
          f"in {args.output}")


if __name__ == "__main__":
    main()
