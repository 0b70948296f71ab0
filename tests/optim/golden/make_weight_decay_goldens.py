#!/usr/bin/env python3
"""Golden data for tests/optim/weight_decay_test.cpp: which parameters Hugging Face's Trainer decays, and one AdamW
step with the Trainer's grouping.

For each tiny model of tests/models/golden (GPT-2, Llama, Qwen2, BERT, DistilBERT: the architectures config.json
names, built from it by transformers) and for each with a default LoRA adapter (peft's get_peft_model with the
task's default target modules, as hpctrain's default_lora_targets, and modules to save), `weight_decay.json` holds the trainable parameters (hpctrain's
names: peft's less "base_model.model.", ".default" and ".modules_to_save") and those of them that
transformers' own `Trainer.get_decay_parameter_names` decays, as the Trainer's create_optimizer groups them
(a name in that list and requires_grad).

`adamw_step.safetensors`: one torch.optim.AdamW step (lr 1e-2, weight decay 0.1, Trainer's two groups) on the
tiny GPT-2 and Llama weights with the gradient cos(3 p + 1) per parameter p: "<model>.after.<name>".

Made with transformers 5.24.0, peft 0.21.2 and torch 2.15.0:
    python3 tests/optim/golden/make_weight_decay_goldens.py
"""
import json
import os

import torch
import transformers
from peft import LoraConfig, get_peft_model
from safetensors.torch import save_file
from transformers import Trainer

HERE = os.path.dirname(os.path.abspath(__file__))
MODELS = os.path.join(HERE, "..", "..", "models", "golden")
FOLDERS = {"gpt2": "tiny-gpt2-f32", "llama": "tiny-llama-gqa-llama3", "qwen2": "tiny-qwen2",
           "bert": "tiny-bert-f32", "distilbert": "tiny-distilbert-f32"}
TARGETS = {"gpt2": ["c_attn"], "llama": ["q_proj", "v_proj"], "qwen2": ["q_proj", "v_proj"], "bert": ["query", "value"],
           "distilbert": ["q_lin", "v_lin"]}  # peft's defaults per model type (hpctrain's default_lora_targets)
STEP = {"lr": 1e-2, "weight_decay": 0.1}


def build(folder):
    config = transformers.AutoConfig.from_pretrained(folder)
    cls = getattr(transformers, config.architectures[0])
    return cls.from_pretrained(folder, dtype=torch.float32)


def hpctrain_name(name):
    name = name.removeprefix("base_model.model.")
    return name.replace(".modules_to_save.default.", ".").replace(".default.", ".")


def decay_split(model):
    """(trainable names, decayed names) as Trainer.create_optimizer groups them, in hpctrain's names."""
    decay = set(Trainer.get_decay_parameter_names(None, model))
    trainable = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    return [hpctrain_name(n) for n, _ in trainable], [hpctrain_name(n) for n, _ in trainable if n in decay]


def with_lora(model, targets):
    seq_cls = "ForSequenceClassification" in type(model).__name__
    return get_peft_model(model, LoraConfig(r=4, lora_alpha=8, target_modules=targets,
                                            task_type="SEQ_CLS" if seq_cls else "CAUSAL_LM"))


def adamw_step(model):
    decay = set(Trainer.get_decay_parameter_names(None, model))
    named = list(model.named_parameters())
    groups = [{"params": [p for n, p in named if n in decay], "weight_decay": STEP["weight_decay"]},
              {"params": [p for n, p in named if n not in decay], "weight_decay": 0.0}]
    optimizer = torch.optim.AdamW(groups, lr=STEP["lr"])
    with torch.no_grad():
        for _, p in named:
            p.grad = torch.cos(3 * p + 1)
    optimizer.step()
    return {n: p.detach().clone().contiguous() for n, p in named}


def main():
    golden = {}
    for kind, folder in FOLDERS.items():
        path = os.path.join(MODELS, folder)
        trainable, decayed = decay_split(build(path))
        golden[kind] = {"folder": folder, "trainable": trainable, "decayed": decayed}
        lora_trainable, lora_decayed = decay_split(with_lora(build(path), TARGETS[kind]))
        golden[kind + "+lora"] = {"folder": folder, "lora_r": 4, "lora_alpha": 8, "target_modules": TARGETS[kind],
                                  "trainable": lora_trainable, "decayed": lora_decayed}
    with open(os.path.join(HERE, "weight_decay.json"), "w") as f:
        json.dump({"adamw_step": STEP, "cases": golden}, f, indent=1)
        f.write("\n")
    tensors = {}
    for kind in ("gpt2", "llama"):
        for name, tensor in adamw_step(build(os.path.join(MODELS, FOLDERS[kind]))).items():
            tensors[f"{kind}.after.{name}"] = tensor
    save_file(tensors, os.path.join(HERE, "adamw_step.safetensors"))


if __name__ == "__main__":
    main()
