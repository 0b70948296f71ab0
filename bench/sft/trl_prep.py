"""The TRL peer of `hpctrain prep sft` (bench/sft/run.sh): SFTTrainer's own dataset preparation
(SFTTrainer._prepare_dataset: datasets.map with tokenizer.apply_chat_template(return_assistant_tokens_mask=True),
labels from the assistant masks, truncation to max_length, dropping rows left without a target) on a JSONL file of
messages rows, timed from load_dataset to the prepared dataset, num_proc=N. Prints one line: rows, tokens, target
tokens, seconds."""
import argparse
import os
import tempfile
import time

import datasets
import transformers
import trl

parser = argparse.ArgumentParser()
parser.add_argument("--input", required=True)
parser.add_argument("--tokenizer", required=True)
parser.add_argument("--num-proc", type=int, default=1)
parser.add_argument("--max-length", type=int, default=128)
args = parser.parse_args()
datasets.disable_progress_bars()
tokenizer = transformers.AutoTokenizer.from_pretrained(args.tokenizer)
config = transformers.Qwen2Config(vocab_size=len(tokenizer), hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                                  num_attention_heads=2, num_key_value_heads=1)
with tempfile.TemporaryDirectory() as tmp:
    sft = trl.SFTConfig(output_dir=tmp, assistant_only_loss=True, max_length=args.max_length, report_to=[],
                        use_cpu=True, dataset_num_proc=args.num_proc if args.num_proc > 1 else None)
    trainer = trl.SFTTrainer(model=transformers.Qwen2ForCausalLM(config), args=sft, processing_class=tokenizer,
                             train_dataset=datasets.Dataset.from_list(
                                 [{"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]}]))
    start = time.perf_counter()
    rows = datasets.load_dataset("json", data_files=args.input, split="train", cache_dir=os.path.join(tmp, "cache"))
    prepared = trainer._prepare_dataset(rows, tokenizer, sft, packing=False, formatting_func=None, dataset_name="train")
    seconds = time.perf_counter() - start
tokens = sum(len(ids) for ids in prepared["input_ids"])
targets = sum(sum(label != -100 for label in labels) for labels in prepared["labels"])
print(f"trl: {len(prepared)} rows, {tokens} tokens, {targets} targets, {seconds:.3f} s")
