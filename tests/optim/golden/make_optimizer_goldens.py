#!/usr/bin/env python3
"""Writes optimizer_goldens.safetensors: torch.optim.SGD and transformers' Adafactor on fixed parameters and
gradients, for tests/optim/optimizer_goldens_test.cpp. Run with a Python that has torch, transformers and
safetensors (e.g. .venv-torch2/bin/python tests/optim/golden/make_optimizer_goldens.py).

Each case trains three float32 parameters (a 2-D "layer.weight", a vector "layer.bias", a 3-D
"conv.weight") for four steps in Hugging Face Trainer's two groups (weight decay on the weights, none on
the bias), the learning rate changing every step. Tensors: "<case>.init.<param>", "<case>.grad<k>.<param>",
"<case>.final.<param>", "<case>.state.<key>" (the optimizer's state after the last step, named as
hpctrain names it) and "<case>.lr" (float64, one per step). The file's metadata "cases" is a JSON object:
case -> hpctrain's OptimizerOptions members (and "versions": the libraries used).
"""
import json
import pathlib

import safetensors.torch
import torch
import transformers
from transformers.optimization import Adafactor

STEPS = 4
SHAPES = {"layer.weight": (5, 7), "layer.bias": (7,), "conv.weight": (2, 3, 4)}
LRS = [0.05, 0.04, 0.03, 0.02]

CASES = {
    "sgd_plain": {"optim": "sgd", "weight_decay": 0.01},
    "sgd_momentum_dampening": {"optim": "sgd", "weight_decay": 0.01, "sgd_momentum": 0.9, "sgd_dampening": 0.25},
    "sgd_nesterov": {"optim": "sgd", "weight_decay": 0.02, "sgd_momentum": 0.8, "sgd_nesterov": True},
    "adafactor_trainer": {"optim": "adafactor", "weight_decay": 0.01},
    "adafactor_beta1": {"optim": "adafactor", "weight_decay": 0.05, "adafactor_beta1": 0.9,
                        "adafactor_clip_threshold": 0.5},
    # clip_threshold 2: updates with RMS below it pass unclipped (the other cases clip nearly every step)
    "adafactor_relative_step": {"optim": "adafactor", "adafactor_relative_step": True,
                                "adafactor_scale_parameter": True, "adafactor_clip_threshold": 2.0},
    "adafactor_warmup_init": {"optim": "adafactor", "weight_decay": 0.1, "adafactor_relative_step": True,
                              "adafactor_scale_parameter": True, "adafactor_warmup_init": True,
                              "adafactor_decay_rate": -0.5},
}


def make_optimizer(groups, o):
    wd = o.get("weight_decay", 0.0)
    param_groups = [{"params": groups[0], "weight_decay": wd}, {"params": groups[1], "weight_decay": 0.0}]
    if o["optim"] == "sgd":
        return torch.optim.SGD(param_groups, lr=LRS[0], momentum=o.get("sgd_momentum", 0.0),
                               dampening=o.get("sgd_dampening", 0.0), nesterov=o.get("sgd_nesterov", False),
                               foreach=False)
    relative = o.get("adafactor_relative_step", False)
    beta1 = o.get("adafactor_beta1", 0.0)
    return Adafactor(param_groups, lr=None if relative else LRS[0], beta1=beta1 if beta1 > 0 else None,
                     clip_threshold=o.get("adafactor_clip_threshold", 1.0),
                     decay_rate=o.get("adafactor_decay_rate", -0.8), relative_step=relative,
                     scale_parameter=o.get("adafactor_scale_parameter", False),
                     warmup_init=o.get("adafactor_warmup_init", False))


def state_of(case, optimizer, params, o):
    """The optimizer's state under hpctrain's names (sgd.hpp, adafactor.hpp)."""
    out = {}
    for name, p in params.items():
        s = optimizer.state[p]
        if o["optim"] == "sgd":
            if s.get("momentum_buffer") is not None:
                out[f"{case}.state.momentum_buffer.{name}"] = s["momentum_buffer"]
            continue
        for key in ("exp_avg", "exp_avg_sq", "exp_avg_sq_row", "exp_avg_sq_col"):
            if key in s:
                out[f"{case}.state.{key}.{name}"] = s[key]
    return out


def run_case(case, o):
    gen = torch.Generator().manual_seed(sorted(CASES).index(case) + 1)
    params = {n: torch.randn(s, generator=gen).requires_grad_(True) for n, s in SHAPES.items()}
    out = {f"{case}.init.{n}": p.detach().clone() for n, p in params.items()}
    groups = ([params["layer.weight"], params["conv.weight"]], [params["layer.bias"]])
    optimizer = make_optimizer(groups, o)
    for k in range(STEPS):
        for n, p in params.items():
            p.grad = torch.randn(p.shape, generator=gen) * (k + 1)
            out[f"{case}.grad{k}.{n}"] = p.grad.clone()
        for g in optimizer.param_groups:
            if g["lr"] is not None:
                g["lr"] = LRS[k]
        optimizer.step()
    out.update({f"{case}.final.{n}": p.detach().clone() for n, p in params.items()})
    out.update(state_of(case, optimizer, params, o))
    out[f"{case}.lr"] = torch.tensor(LRS, dtype=torch.float64)
    return out


def main():
    tensors = {}
    for case, o in CASES.items():
        tensors.update(run_case(case, o))
    metadata = {"cases": json.dumps(CASES, sort_keys=True),
                "versions": f"torch {torch.__version__}, transformers {transformers.__version__}"}
    path = pathlib.Path(__file__).with_name("optimizer_goldens.safetensors")
    safetensors.torch.save_file({k: v.contiguous() for k, v in tensors.items()}, str(path), metadata=metadata)
    print(f"wrote {path} ({len(tensors)} tensors; {metadata['versions']})")


if __name__ == "__main__":
    main()
