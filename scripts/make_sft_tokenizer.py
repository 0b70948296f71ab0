#!/usr/bin/env python3
"""Trains the small Qwen2.5-style byte-level BPE tokenizer shipped in data/sft-example/tokenizer/ (scripts/sft-example.sh).

Qwen2's choices with Hugging Face `tokenizers`: NFC normalizer, Qwen2's pre-tokenizer regex (single digits) then
ByteLevel, BPE merges learned up to --vocab-size ids, the special tokens <|endoftext|> (padding), <|im_start|> and
<|im_end|> (EOS: the end of a turn), the ByteLevel post-processor and decoder; the chat template is trl's
qwen2_5_training.jinja (Qwen 2.5's own with {% generation %} around the assistant's output), copied from
tests/chat/templates/. The corpus is the messages of a JSONL file written by scripts/gcide_to_sft.py. Writes
OUTPUT/tokenizer.json, tokenizer_config.json and chat_template.jinja, which AutoTokenizer.from_pretrained(OUTPUT)
and `hpctrain prep sft --tokenizer OUTPUT` read. The same corpus and `tokenizers` version give the same files.

Usage: python make_sft_tokenizer.py --input gcide-sft.jsonl --output data/sft-example/tokenizer [--vocab-size 4096]
       (needs `pip install tokenizers transformers`)
"""
import argparse
import json
import os
import tempfile

import tokenizers
import transformers
from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

QWEN2_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
                 r"\s*[\r\n]+|\s+(?!\S)|\s+")
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
TEMPLATE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "chat", "templates",
                        "qwen2_5_training.jinja")


def texts(path):
    with open(path, encoding="utf-8") as f:
        for line in f:
            for message in json.loads(line)["messages"]:
                yield message["content"]
    yield "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--input", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--vocab-size", type=int, default=4096)
    args = parser.parse_args()
    tokenizer = Tokenizer(models.BPE(unk_token=None, fuse_unk=False, byte_fallback=False))
    tokenizer.normalizer = normalizers.NFC()
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(vocab_size=args.vocab_size, min_frequency=2, special_tokens=SPECIALS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tokenizer.train_from_iterator(texts(args.input), trainer)
    os.makedirs(args.output, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "tokenizer.json")
        tokenizer.save(path)
        fast = transformers.PreTrainedTokenizerFast(tokenizer_file=path, eos_token="<|im_end|>",
                                                    pad_token="<|endoftext|>", model_max_length=256)
        with open(TEMPLATE, encoding="utf-8") as f:
            fast.chat_template = f.read()
        fast.save_pretrained(args.output)
    extra = os.path.join(args.output, "special_tokens_map.json")
    if os.path.exists(extra):
        os.remove(extra)
    print(f"make_sft_tokenizer: {tokenizer.get_vocab_size()} ids (tokenizers {tokenizers.__version__}) in {args.output}")


if __name__ == "__main__":
    main()
