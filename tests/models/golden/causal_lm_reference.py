#!/usr/bin/env python3
"""Golden data for tests/models causal LMs: tiny GPT-2, Llama and Qwen2 checkpoints saved by Hugging Face
transformers itself, and the logits and losses transformers computes for them.

Needs torch, transformers (>= 4.56 for the `dtype` argument; the files here were made with transformers 5.24.0
and torch 2.15.0) and safetensors, e.g. a venv with `pip install torch transformers safetensors`. Writes,
next to this script:
  tiny-gpt2-f32/, tiny-gpt2-bf16/        GPT2LMHeadModel (tied head), stored float32 / bfloat16
  tiny-llama-gqa-llama3/                 LlamaForCausalLM, 4 query / 2 key-value heads, rope_type llama3, untied
  tiny-llama-tied/                       LlamaForCausalLM, tied head, config.json rewritten in the transformers
                                         4.x spelling (rope_theta + rope_scaling {"type": "linear"})
  tiny-qwen2/                            Qwen2ForCausalLM (q/k/v bias), GQA, untied
  causal_lm_golden.json                  per checkpoint and case: input_ids, attention_mask, labels (-100 under
                                         padding), the logits of the real (mask 1) tokens in row-major order
                                         [N, vocab] (6 decimals), transformers' loss for those labels
Each reference runs transformers in float32 on the folder as saved (a bfloat16 folder is loaded upcast).
Run:    python3 tests/models/golden/causal_lm_reference.py
Check a folder hpctrain saved (test_models writes them when HPCTRAIN_SAVE_CAUSAL_LM_TO=<dir> is set):
        python3 tests/models/golden/causal_lm_reference.py --check <dir>
"""
import json
import os
import shutil
import sys

import torch
from transformers import (AutoModelForCausalLM, GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM,
                          Qwen2Config, Qwen2ForCausalLM)

HERE = os.path.dirname(os.path.abspath(__file__))
SEED = 20251202
VOCAB = 64
LENGTH = 7

SMALL = dict(vocab_size=VOCAB, bos_token_id=1, eos_token_id=2, pad_token_id=None)
LLAMA = dict(SMALL, hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, max_position_embeddings=64)


def models():
    """name -> (model, stored dtype, config.json edit or None)."""
    llama3 = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
              "original_max_position_embeddings": 32}
    gpt2 = GPT2LMHeadModel(GPT2Config(n_embd=24, n_layer=2, n_head=4, n_positions=32, **SMALL))
    return {
        "tiny-gpt2-f32": (gpt2, torch.float32, None),
        "tiny-gpt2-bf16": (gpt2, torch.bfloat16, None),
        # rope_theta 100: head_dim 8 then has a wavelength (19.9) inside llama3's smoothed band [8, 32].
        "tiny-llama-gqa-llama3": (LlamaForCausalLM(LlamaConfig(rope_theta=100.0, rope_scaling=llama3, **LLAMA)),
                                  torch.float32, None),
        "tiny-llama-tied": (LlamaForCausalLM(LlamaConfig(tie_word_embeddings=True, **LLAMA)), torch.float32,
                            as_transformers4_rope),
        "tiny-qwen2": (Qwen2ForCausalLM(Qwen2Config(rope_theta=1000.0, **LLAMA)), torch.float32, None),
    }


def as_transformers4_rope(config):
    """The same settings as transformers 4.x wrote them: rope_theta at the top, rope_scaling with "type"."""
    params = config.pop("rope_parameters", None) or {"rope_theta": 10000.0}
    config["rope_theta"] = params["rope_theta"]
    config["rope_scaling"] = {"type": "linear", "factor": 2.0}
    config["torch_dtype"] = config.pop("dtype", "float32")
    return config


def randomize(model):
    """Weights that make the logits depend on every tensor (std 0.02 would give near-constant logits)."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name or name.endswith(("ln_1.weight", "ln_2.weight", "ln_f.weight")):
                p.copy_(1.0 + 0.1 * torch.randn_like(p))
            elif name.endswith("bias"):
                p.copy_(0.1 * torch.randn_like(p))
            elif "wte" in name or "wpe" in name or "embed_tokens" in name:
                p.copy_(torch.randn_like(p))
            else:
                p.copy_(0.2 * torch.randn_like(p))


def cases():
    """No padding; right padding; the same rows left-padded (pad id 0, labels -100 under padding)."""
    g = torch.Generator().manual_seed(SEED + 1)
    lengths = [LENGTH, 5, 2]
    tokens = [torch.randint(3, VOCAB, (n,), generator=g) for n in lengths]
    right = torch.zeros(3, LENGTH, dtype=torch.long)
    right_mask = torch.zeros(3, LENGTH, dtype=torch.long)
    left = torch.zeros(3, LENGTH, dtype=torch.long)
    left_mask = torch.zeros(3, LENGTH, dtype=torch.long)
    for row, t in enumerate(tokens):
        right[row, :len(t)] = t
        right_mask[row, :len(t)] = 1
        left[row, LENGTH - len(t):] = t
        left_mask[row, LENGTH - len(t):] = 1
    unpadded = torch.randint(3, VOCAB, (2, LENGTH), generator=g)
    return [dict(name="no_padding", input_ids=unpadded, attention_mask=None),
            dict(name="right_padding", input_ids=right, attention_mask=right_mask),
            dict(name="left_padding", input_ids=left, attention_mask=left_mask)]


def rounded(t):
    """Six decimals: 5e-7 of rounding against the tests' 1e-4, half the file of full float repr."""
    return [[round(x, 6) for x in row] for row in t.tolist()]


def run_case(model, case):
    ids, mask = case["input_ids"], case["attention_mask"]
    labels = ids.clone() if mask is None else ids.masked_fill(mask == 0, -100)
    with torch.no_grad():
        out = model(input_ids=ids, attention_mask=mask, labels=labels)
    real = torch.ones_like(ids, dtype=torch.bool) if mask is None else mask.bool()
    entry = {"name": case["name"], "input_ids": ids.tolist(), "labels": labels.tolist(),
             "logits": rounded(out.logits[real]), "loss": out.loss.item()}
    if mask is not None:
        entry["attention_mask"] = mask.tolist()
    return entry


def reference(folder):
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32, attn_implementation="eager").eval()
    sdpa = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32, attn_implementation="sdpa").eval()
    out = []
    for case in cases():
        entry = run_case(model, case)
        other = run_case(sdpa, case)  # transformers' two attentions agree on the real tokens
        assert torch.allclose(torch.tensor(entry["logits"]), torch.tensor(other["logits"]), atol=1e-5), folder
        out.append(entry)
    return out


def save(name, model, dtype, edit):
    folder = os.path.join(HERE, name)
    shutil.rmtree(folder, ignore_errors=True)
    model.to(dtype).save_pretrained(folder)
    model.to(torch.float32)
    os.remove(os.path.join(folder, "generation_config.json"))  # generation settings: not the tests' business
    if edit is not None:
        path = os.path.join(folder, "config.json")
        with open(path) as f:
            config = json.load(f)
        with open(path, "w") as f:
            json.dump(edit(config), f, indent=2, sort_keys=True)
            f.write("\n")
    return folder


def generate():
    torch.manual_seed(SEED)
    golden = {"checkpoints": {}}
    for name, (model, dtype, edit) in models().items():
        if name != "tiny-gpt2-bf16":  # the bf16 folder stores the f32 model's weights rounded
            randomize(model)
        folder = save(name, model, dtype, edit)
        golden["checkpoints"][name] = {"cases": reference(folder)}
    with open(os.path.join(HERE, "causal_lm_golden.json"), "w") as f:
        json.dump(golden, f, separators=(",", ":"))
        f.write("\n")


def check(saved_root):
    """Every folder under saved_root (named as a golden checkpoint) gives the golden logits in transformers."""
    with open(os.path.join(HERE, "causal_lm_golden.json")) as f:
        golden = json.load(f)
    worst = {}
    for name in sorted(os.listdir(saved_root)):
        expected = golden["checkpoints"][name]["cases"]
        got = reference(os.path.join(saved_root, name))
        diff = max((torch.tensor(g["logits"]) - torch.tensor(e["logits"])).abs().max().item()
                   for g, e in zip(got, expected))
        worst[name] = diff
        print(f"{name}: AutoModelForCausalLM.from_pretrained(saved) max |logits - golden| = {diff:.3g}")
    assert worst and max(worst.values()) < 1e-4, worst


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--check":
        check(sys.argv[2])
    else:
        generate()
