"""transformers + torch peer of bench/loss/run.sh: one process, no DDP, the step a PyTorch user writes.

The model is transformers' own LlamaForCausalLM from the benchmark's config.json (SDPA attention), float32 on the CPU,
torch.optim.AdamW (lr 1e-4, no weight decay) with the gradient norm clipped at 1 (hpctrain's and HF Trainer's
default). A step: zero grads, forward of the next --batch rows of the file's train split with labels = input_ids
(transformers' shifted mean next-token loss: the [batch, length, vocabulary] logits, upcast, log_softmax), backward,
clipping, optimizer step. After --warmup steps, --steps steps are timed. Prints one JSON line.

Usage: python peer.py --config llama.json --data lm.h5 --batch 4 [--steps 2] [--warmup 1] [--threads 2]
"""
import argparse
import json
import time

import h5py
import numpy as np
import torch
import transformers
from transformers import AutoConfig, AutoModelForCausalLM


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True)
    parser.add_argument("--data", required=True)
    parser.add_argument("--batch", type=int, required=True)
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    values = json.load(open(args.config))
    config = AutoConfig.for_model(values.pop("model_type"), **values)
    model = AutoModelForCausalLM.from_config(config, attn_implementation="sdpa")
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.0)
    with h5py.File(args.data, "r") as f:
        offsets, ids = f["train/offsets"][:], f["train/input_ids"][:]
    length = int(offsets[1] - offsets[0])
    rows = torch.from_numpy(ids.astype(np.int64)).view(-1, length)
    times = []
    for step in range(args.warmup + args.steps):
        batch = rows[step * args.batch:(step + 1) * args.batch]
        start = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        loss = model(input_ids=batch, labels=batch).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        if step >= args.warmup:
            times.append(time.perf_counter() - start)
    print(json.dumps({"impl": f"transformers {transformers.__version__} + torch {torch.__version__}",
                      "step_s": times, "final_loss": loss.item()}), flush=True)


if __name__ == "__main__":
    main()
