"""The peer of bench/qlora/run.sh: transformers + peft + bitsandbytes QLoRA steps on the CPU, as hpctrain's.

Loads BASE with BitsAndBytesConfig(load_in_4bit, nf4, double quantization, compute dtype float32) on the CPU, adds
peft's LoRA (r, alpha 2r, dropout 0, all-linear), and runs WARMUP + STEPS AdamW steps (lr 1e-4, weight decay 0,
gradient norm clipped at 1) on the rows of DATA (random ids, batch BATCH). Prints one JSON line: seconds per timed
step (each step timed alone), the peak RSS so far (ru_maxrss) and the model's bytes (parameters and buffers).
Usage: python peer.py BASE DATA --batch B --steps S --warmup W --rank R --threads T
"""
import argparse
import json
import resource
import time

import h5py
import numpy as np
import torch
from peft import LoraConfig, get_peft_model
from transformers import AutoModelForCausalLM, BitsAndBytesConfig


def main():
    p = argparse.ArgumentParser()
    p.add_argument("base")
    p.add_argument("data")
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--rank", type=int, default=16)
    p.add_argument("--threads", type=int, default=1)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    config = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=True,
                                bnb_4bit_compute_dtype=torch.float32)
    base = AutoModelForCausalLM.from_pretrained(a.base, quantization_config=config, device_map="cpu", dtype=torch.float32)
    model = get_peft_model(base, LoraConfig(task_type="CAUSAL_LM", r=a.rank, lora_alpha=2 * a.rank, lora_dropout=0.0,
                                            target_modules="all-linear"))
    model.train()
    f = h5py.File(a.data, "r")["train"]
    length = int(f["offsets"][1] - f["offsets"][0])
    ids = torch.from_numpy(f["input_ids"][: (a.warmup + a.steps) * a.batch * length].astype(np.int64))
    ids = ids.view(-1, length)
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4, weight_decay=0.0)
    times = []
    for step in range(a.warmup + a.steps):
        x = ids[step * a.batch:(step + 1) * a.batch]
        start = time.perf_counter()
        loss = model(input_ids=x, labels=x).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_([p for p in model.parameters() if p.requires_grad], 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if step >= a.warmup:
            times.append(time.perf_counter() - start)
    model_bytes = sum(t.nbytes for t in model.parameters()) + sum(t.nbytes for t in model.buffers())
    print(json.dumps({"side": "peer", "step_seconds": times, "peak_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
                      "model_bytes": model_bytes}))


if __name__ == "__main__":
    main()
