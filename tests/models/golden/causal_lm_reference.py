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
  tiny-llama-tokenizer/                  LlamaForCausalLM (vocab 1504, tied) with the Llama-3-style byte-level BPE
                                         tokenizer of tests/tokenize/golden/bpe/llama3 (for `hpctrain generate`)
  generation_golden.json                 greedy `generate` (do_sample=False) per checkpoint: prompt ids, max_new_tokens,
                                         the new ids (EOS: config.json's 2, or the case's eos_token_ids list); text
                                         prompts of tiny-llama-tokenizer with their ids and decoded new text; the
                                         tokens transformers' temperature/top-k/top-p warpers keep
Each reference runs transformers in float32 on the folder as saved (a bfloat16 folder is loaded upcast).
Run:    python3 tests/models/golden/causal_lm_reference.py
Only generation_golden.json and tiny-llama-tokenizer/ (the other folders kept as they are):
        python3 tests/models/golden/causal_lm_reference.py --generation
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
    generation_golden()


GENERATION_CHECKPOINTS = ["tiny-gpt2-f32", "tiny-gpt2-bf16", "tiny-llama-gqa-llama3", "tiny-llama-tied", "tiny-qwen2"]
TOKENIZER = os.path.join(HERE, "..", "..", "tokenize", "golden", "bpe", "llama3")
TEXT_PROMPTS = ["Hello world", "The quick brown fox", "42 tokens, don't stop!"]
MAX_NEW = 10
MARGIN = 1e-3  # the top two logits of every greedy step differ by more: summation order cannot flip the choice


def greedy(model, prompt, max_new, eos=None):
    """transformers' greedy generate: the new ids, or None when a step's top two logits are within MARGIN.
    eos: a list of EOS ids instead of the config's."""
    ids = torch.tensor([prompt])
    eos = model.config.eos_token_id if eos is None else eos
    with torch.no_grad():
        out = model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False, num_beams=1,
                             max_new_tokens=max_new, eos_token_id=eos, pad_token_id=model.config.eos_token_id,
                             output_logits=True, return_dict_in_generate=True)
    for logits in out.logits:
        top2 = logits[0].float().topk(2).values
        if (top2[0] - top2[1]).item() <= MARGIN:
            return None
    return out.sequences[0, len(prompt):].tolist()


def generation_cases(model, vocab, g):
    """Prompts of 1, 3 and 7 ids (drawn again while a step is within MARGIN)."""
    cases = []
    for length in (1, 3, 7):
        while True:
            prompt = torch.randint(3, vocab, (length,), generator=g).tolist()
            new = greedy(model, prompt, MAX_NEW)
            if new is not None:
                break
        cases.append({"prompt_ids": prompt, "max_new_tokens": MAX_NEW, "new_ids": new})
    # The random models rarely emit their EOS id 2: a case whose EOS list names a token the generation emits.
    for case in cases:
        new = case["new_ids"]
        first_new = [i for i in range(1, len(new)) if new[i] not in new[:i]]
        if first_new:
            eos = [2, new[first_new[0]]]
            stopped = greedy(model, case["prompt_ids"], MAX_NEW, eos)
            assert stopped == new[:first_new[0] + 1], (stopped, new)
            cases.append(dict(case, new_ids=stopped, eos_token_ids=eos))
            break
    return cases


def load_for_generation(folder):
    eager = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32, attn_implementation="eager").eval()
    sdpa = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32, attn_implementation="sdpa").eval()
    return eager, sdpa


def tokenizer_model():
    """A small Llama whose vocabulary is the llama3 test tokenizer's (ids 0..1503), with that tokenizer."""
    from transformers import AutoTokenizer
    tokenizer = AutoTokenizer.from_pretrained(TOKENIZER)
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                         tie_word_embeddings=True, bos_token_id=tokenizer.bos_token_id,
                         eos_token_id=tokenizer.eos_token_id, pad_token_id=None)
    torch.manual_seed(SEED + 2)
    model = LlamaForCausalLM(config)
    randomize(model)
    folder = save("tiny-llama-tokenizer", model, torch.float32, None)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(TOKENIZER, name), os.path.join(folder, name))
    return folder, tokenizer


def text_cases(folder, tokenizer):
    eager, sdpa = load_for_generation(folder)
    out = []
    for text in TEXT_PROMPTS:
        prompt = tokenizer(text)["input_ids"]
        new = greedy(eager, prompt, 12)
        assert new is not None and new == greedy(sdpa, prompt, 12), text
        out.append({"prompt": text, "prompt_ids": prompt, "max_new_tokens": 12, "new_ids": new,
                    "text": tokenizer.decode(new)})
    return out


def warper_cases(g):
    """The tokens transformers' TemperatureLogitsWarper + TopK + TopP keep, for a few settings."""
    from transformers.generation.logits_process import (TemperatureLogitsWarper, TopKLogitsWarper,
                                                        TopPLogitsWarper)
    logits = torch.randn(4, 24, generator=g) * 3
    logits[3, 5] = logits[3, 6] = logits[3].max() + 1  # a tie at the top
    out = {"logits": logits.tolist(), "cases": []}
    for temperature, top_k, top_p in [(1.0, 5, 1.0), (0.7, 0, 0.9), (1.3, 3, 0.5), (1.0, 0, 0.3), (0.5, 30, 0.95),
                                      (1.0, 1, 1.0), (2.0, 0, 1e-6)]:
        scores = TemperatureLogitsWarper(temperature)(None, logits.clone())
        if top_k > 0:
            scores = TopKLogitsWarper(top_k)(None, scores)
        if top_p < 1.0:
            scores = TopPLogitsWarper(top_p)(None, scores)
        out["cases"].append({"temperature": temperature, "top_k": top_k, "top_p": top_p,
                             "kept": torch.isfinite(scores).tolist()})
    return out


def generation_golden():
    g = torch.Generator().manual_seed(SEED + 3)
    golden = {"max_margin_note": f"every greedy step's top two logits differ by more than {MARGIN}",
              "checkpoints": {}}
    for name in GENERATION_CHECKPOINTS:
        eager, sdpa = load_for_generation(os.path.join(HERE, name))
        cases = generation_cases(eager, VOCAB, g)
        for case in cases:  # transformers' two attentions agree
            assert greedy(sdpa, case["prompt_ids"], MAX_NEW, case.get("eos_token_ids")) == case["new_ids"], name
        golden["checkpoints"][name] = {"eos_token_id": 2, "cases": cases}
    folder, tokenizer = tokenizer_model()
    golden["checkpoints"]["tiny-llama-tokenizer"] = {"eos_token_id": tokenizer.eos_token_id,
                                                     "cases": text_cases(folder, tokenizer)}
    golden["warpers"] = warper_cases(g)
    stops = [c for entry in golden["checkpoints"].values() for c in entry["cases"] if "eos_token_ids" in c]
    assert len(stops) >= 3, "fewer than 3 golden cases stop at an EOS id"
    with open(os.path.join(HERE, "generation_golden.json"), "w") as f:
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
    elif len(sys.argv) == 2 and sys.argv[1] == "--generation":
        generation_golden()
    else:
        generate()
