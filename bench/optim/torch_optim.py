#!/usr/bin/env python3
"""Peer of bench_optim: step time and state bytes of PyTorch's, Transformers' and bitsandbytes' optimizers on
the same parameters (the benchmark model of bench/models/torch_models.py: the same names, shapes and
Hugging Face weight-decay groups), each parameter with a random gradient set once; a step is
optimizer.step() alone. Prints one JSON line per optimizer, with bench_optim's fields and "optim" named as
hpctrain's --optim names it:
  adamw_torch     torch.optim.AdamW(foreach=True)       (Hugging Face's adamw_torch; fused=False)
  adamw_bnb_8bit  bitsandbytes.optim.AdamW8bit          (block 256, min_8bit_size 4096: HF's adamw_bnb_8bit)
  adafactor       transformers.optimization.Adafactor   (scale_parameter=False, relative_step=False, beta1 None)
  sgd             torch.optim.SGD(momentum=0.9, foreach=True)
state_bytes: bytes of every tensor in optimizer.state (bitsandbytes' qmaps and step counters included);
state_bytes_2d: the same over the parameters with two or more dimensions.
An optimizer whose library is missing or fails here prints {"optim", "error"} instead.

Usage (with .venv-torch2/bin/python from scripts/setup-torch2.sh, or any Python with torch): torch_optim.py --model distilbert|distilbert-base
  [--optim NAME[,NAME...]] [--threads N=1] [--steps S=10] [--warmup W=2]
"""
import argparse
import json
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "models"))
import torch_models  # noqa: E402

NAMES = ["adamw_torch", "adamw_bnb_8bit", "adafactor", "sgd"]


def weight_decay_groups(model, weight_decay):
    """Hugging Face Trainer's groups, as hpctrain's excluded_from_weight_decay: no decay for biases and LayerNorm."""
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        excluded = name.endswith("bias") or "LayerNorm." in name or "layer_norm." in name
        (no_decay if excluded else decay).append(p)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


def make(optim, groups):
    lr = 1e-4
    if optim == "adamw_torch":
        return torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.999), eps=1e-8, foreach=True)
    if optim == "sgd":
        return torch.optim.SGD(groups, lr=lr, momentum=0.9, foreach=True)
    if optim == "adafactor":
        from transformers.optimization import Adafactor
        return Adafactor(groups, lr=lr, scale_parameter=False, relative_step=False, warmup_init=False)
    if optim == "adamw_bnb_8bit":
        import bitsandbytes
        return bitsandbytes.optim.AdamW8bit(groups, lr=lr, betas=(0.9, 0.999), eps=1e-8, min_8bit_size=4096)
    raise SystemExit(f"torch_optim.py: --optim {optim}: expected one of {', '.join(NAMES)}")


def state_bytes(optimizer, min_dim=0):
    """Bytes of the state tensors of the parameters with at least min_dim dimensions."""
    return sum(t.numel() * t.element_size() for p, s in optimizer.state.items() if p.dim() >= min_dim
               for t in s.values() if torch.is_tensor(t))


def time_steps(optimizer, warmup, steps):
    times = []
    for step in range(warmup + steps):
        start = time.perf_counter()
        optimizer.step()
        if step >= warmup:
            times.append(time.perf_counter() - start)
    return statistics.median(times)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", choices=["distilbert", "distilbert-base"], default="distilbert")
    parser.add_argument("--optim", default=",".join(NAMES))
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    c = torch_models.DISTILBERT if args.model == "distilbert" else torch_models.DISTILBERT_BASE
    model = torch_models.distilbert_for_sequence_classification(c)
    params = sum(p.numel() for p in model.parameters())
    for p in model.parameters():
        p.grad = torch.randn_like(p) * 1e-2
    for optim in args.optim.split(","):
        result = {"impl": "torch", "model": args.model, "optim": optim, "threads": args.threads, "params": params,
                  "steps": args.steps}
        try:
            optimizer = make(optim, weight_decay_groups(model, 0.01))
            median = time_steps(optimizer, args.warmup, args.steps)
            result.update(median_s=median, ns_per_param=median * 1e9 / params, state_bytes=state_bytes(optimizer),
                          state_bytes_2d=state_bytes(optimizer, 2))
        except (ImportError, RuntimeError) as error:
            result["error"] = f"{type(error).__name__}: {error}"
        print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
