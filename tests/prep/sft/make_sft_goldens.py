#!/usr/bin/env python3
"""Goldens for `hpctrain prep sft`: TRL's SFTTrainer preprocessing of three row formats with four chat templates.

Writes, next to this script:
  <style>/            a small byte-level BPE tokenizer (tokenizer.json, tokenizer_config.json with the model family's
                      special tokens and, as chat_template.jinja, trl's *_training.jinja template of that family):
                      qwen2_5 (Qwen2's regex, NFC), llama3 (Llama 3's regex, a BOS post-processor), phi3 (GPT-2's
                      ByteLevel), gemma (GPT-2's ByteLevel, a BOS token in the template);
  conversations.jsonl     messages rows (several turns, Unicode, spaces that templates trim);
  chat_pairs.jsonl        prompt/completion rows as message lists;
  text_pairs.jsonl        prompt/completion rows as plain strings;
  goldens.json        "apply_chat_template": per style, conversations.jsonl's rows 1 and 3 through the tokenizer's
                      apply_chat_template(tokenize=False) and (tokenize=True, return_assistant_tokens_mask=True),
                      both add_generation_prompt values: text, input_ids, assistant_masks;
                      "goldens": per style and file: each row's input_ids and loss mask (labels != -100) after TRL's
                      SFTTrainer(train_dataset=...) prepared it: assistant_only_loss=True for messages rows (the
                      {% generation %} mask), completion_only_loss (the default) for prompt/completion rows,
                      max_length 128 (keep_start; rows left without a target are dropped, as TRL drops them).

Usage: /work/peers/bin/python tests/prep/sft/make_sft_goldens.py   (transformers 5.x, trl, tokenizers, torch)
Deterministic: the tokenizers are trained on a fixed corpus.
"""
import json
import os
import sys
import tempfile

import datasets
import tokenizers
import torch
import transformers
import trl
from datasets import Dataset
from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

HERE = os.path.dirname(os.path.abspath(__file__))
TEMPLATES = os.path.join(HERE, "..", "..", "chat", "templates")
MAX_LENGTH = 128
LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
                  r"\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
                 r"\s*[\r\n]+|\s+(?!\S)|\s+")

CONVERSATIONS = [
    [("user", "What does the word apple mean?"), ("assistant", "A round fruit of the rose family.")],
    [("user", "Define cat."), ("assistant", "A small domesticated carnivore."), ("user", "And dog?"),
     ("assistant", "A domesticated wolf.")],
    [("user", "  Trim me  "), ("assistant", "  spaces around  \n")],
    [("user", "Ünïcödé: café, 日本語, emoji 😀"), ("assistant", "Größe ≠ size; naïve 😀👍🏽")],
    [("user", "Count to three"), ("assistant", "1, 2, 3.")],
    [("user", "A long question " + "about many things " * 12), ("assistant", "A long answer " + "with much detail " * 30)],
    [("user", "Two lines?"), ("assistant", "Line one.\nLine two.")],
    [("user", "x"), ("assistant", "y"), ("user", "z"), ("assistant", "w"), ("user", "v"), ("assistant", "u")],
    [("user", "Say <b>bold</b> & \"quote\""), ("assistant", "<b>bold</b> & \"quote\"")],
    [("user", "Numbers 12345 and 3.14159"), ("assistant", "They are 12345 and 3.14159.")],
]
CHAT_PAIRS = [
    ([("user", "What does the word pear mean?")], [("assistant", "A sweet fruit.")]),
    ([("user", "Capital of France?")], [("assistant", "Paris.")]),
    ([("user", "Ünïcödé prompt 😀")], [("assistant", "Réponse ça va")]),
    ([("user", "Hi"), ("assistant", "Hello!"), ("user", "How are you?")], [("assistant", "Fine, thanks.")]),
    ([("user", "Long prompt " + "that goes on " * 60)], [("assistant", "short")]),
    ([("user", "Two words")], [("assistant", "  two  words  ")]),
]
TEXT_PAIRS = [
    ("The word apple means", " a round fruit."),
    ("Translate to French: cat =>", " chat"),
    ("Q: 2 + 2?\nA:", " 4"),
    ("Ünïcödé prompt:", " réponse 😀"),
    ("A prompt that is long " * 8, " and a completion."),
    ("A prompt far too long for max_length " * 30, " lost."),
    ("Ends with a newline\n", "Next line."),
]

STYLES = {
    "qwen2_5": {"template": "qwen2_5_training.jinja", "specials": ["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
                "config": {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"}},
    "llama3": {"template": "llama3_training.jinja",
               "specials": ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>",
                            "<|eot_id|>"],
               "config": {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>", "pad_token": "<|end_of_text|>"}},
    "phi3": {"template": "phi3_training.jinja", "specials": ["<|endoftext|>", "<|user|>", "<|assistant|>", "<|system|>",
                                                             "<|end|>"],
             "config": {"eos_token": "<|endoftext|>", "pad_token": "<|endoftext|>"}},
    "gemma": {"template": "gemma_training.jinja", "specials": ["<pad>", "<eos>", "<bos>", "<start_of_turn>",
                                                               "<end_of_turn>"],
              "config": {"bos_token": "<bos>", "eos_token": "<eos>", "pad_token": "<pad>"}},
}


def messages(turns):
    return [{"role": role, "content": content} for role, content in turns]


def corpus():
    texts = []
    licenses = "/usr/share/common-licenses"
    for name in sorted(os.listdir(licenses))[:6]:
        path = os.path.join(licenses, name)
        if os.path.isfile(path) and not os.path.islink(path):
            with open(path, encoding="utf-8", errors="replace") as f:
                texts.append(f.read())
    for conversation in CONVERSATIONS:
        texts += [content for _, content in conversation]
    for prompt, completion in TEXT_PAIRS:
        texts += [prompt, completion]
    return texts * 2


def make_tokenizer(style):
    spec = STYLES[style]
    tokenizer = Tokenizer(models.BPE(unk_token=None, fuse_unk=False, byte_fallback=False))
    if style == "qwen2_5":
        tokenizer.normalizer = normalizers.NFC()
    if style in ("qwen2_5", "llama3"):
        pattern = QWEN2_PATTERN if style == "qwen2_5" else LLAMA3_PATTERN
        tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(pattern), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    else:
        tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=700, min_frequency=2, special_tokens=spec["specials"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tokenizer.train_from_iterator(corpus(), trainer)
    if style == "llama3":
        bos = tokenizer.token_to_id("<|begin_of_text|>")
        tokenizer.post_processor = processors.Sequence([
            processors.ByteLevel(trim_offsets=False),
            processors.TemplateProcessing(single="<|begin_of_text|> $A", special_tokens=[("<|begin_of_text|>", bos)])])
    else:
        tokenizer.post_processor = processors.ByteLevel(trim_offsets=False)
    folder = os.path.join(HERE, style)
    os.makedirs(folder, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "tokenizer.json")
        tokenizer.save(path)
        fast = transformers.PreTrainedTokenizerFast(tokenizer_file=path, **spec["config"])
        with open(os.path.join(TEMPLATES, spec["template"]), encoding="utf-8") as f:
            fast.chat_template = f.read()
        fast.save_pretrained(folder)
    for extra in ["special_tokens_map.json"]:
        if os.path.exists(os.path.join(folder, extra)):
            os.remove(os.path.join(folder, extra))
    return transformers.AutoTokenizer.from_pretrained(folder)


def write_jsonl(name, rows):
    with open(os.path.join(HERE, name), "w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    return rows


def trl_prepared(tokenizer, rows, assistant_only_loss):
    """The rows as SFTTrainer prepares them: (source row, input_ids, mask)."""
    config = transformers.Qwen2Config(vocab_size=len(tokenizer), hidden_size=16, intermediate_size=32,
                                      num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1)
    model = transformers.Qwen2ForCausalLM(config)
    dataset = Dataset.from_list([{**row, "source_index": i} for i, row in enumerate(rows)])
    with tempfile.TemporaryDirectory() as tmp:
        args = trl.SFTConfig(output_dir=tmp, assistant_only_loss=assistant_only_loss, max_length=MAX_LENGTH,
                             report_to=[], use_cpu=True, dataset_num_proc=None)
        trainer = trl.SFTTrainer(model=model, args=args, train_dataset=dataset, processing_class=tokenizer)
        prepared = trainer.train_dataset
    return [{"source_index": r["source_index"], "input_ids": r["input_ids"],
             "mask": [int(label != -100) for label in r["labels"]]} for r in prepared]


def main():
    torch.manual_seed(0)
    datasets.disable_progress_bars()
    conversations = write_jsonl("conversations.jsonl", [{"messages": messages(c)} for c in CONVERSATIONS])
    chat_pairs = write_jsonl("chat_pairs.jsonl", [{"prompt": messages(p), "completion": messages(c)} for p, c in CHAT_PAIRS])
    text_pairs = write_jsonl("text_pairs.jsonl", [{"prompt": p, "completion": c} for p, c in TEXT_PAIRS])
    goldens, templates = {}, {}
    for style in STYLES:
        tokenizer = make_tokenizer(style)
        templates[style] = []
        for row in (1, 3):
            for agp in (False, True):
                chat = messages(CONVERSATIONS[row])
                encoded = tokenizer.apply_chat_template(chat, add_generation_prompt=agp, tokenize=True,
                                                        return_dict=True, return_assistant_tokens_mask=True)
                templates[style].append({"row": row, "add_generation_prompt": agp,
                                         "text": tokenizer.apply_chat_template(chat, add_generation_prompt=agp,
                                                                               tokenize=False),
                                         "input_ids": encoded["input_ids"],
                                         "assistant_masks": encoded["assistant_masks"]})
        goldens[style] = {
            "conversations.jsonl": trl_prepared(tokenizer, conversations, assistant_only_loss=True),
            "chat_pairs.jsonl": trl_prepared(tokenizer, chat_pairs, assistant_only_loss=False),
            "text_pairs.jsonl": trl_prepared(tokenizer, text_pairs, assistant_only_loss=False),
        }
    out = {"generated_by": {"trl": trl.__version__, "transformers": transformers.__version__,
                            "tokenizers": tokenizers.__version__, "python": sys.version.split()[0]},
           "max_length": MAX_LENGTH, "apply_chat_template": templates, "goldens": goldens}
    with open(os.path.join(HERE, "goldens.json"), "w", encoding="utf-8") as f:
        json.dump(out, f, separators=(",", ":"))
        f.write("\n")
    print("make_sft_goldens:", {style: {file: len(rows) for file, rows in files.items()} for style, files in goldens.items()})


if __name__ == "__main__":
    main()
