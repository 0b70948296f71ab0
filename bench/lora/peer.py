"""peft + transformers + PyTorch DDP peer of `hpctrain train --lora-*` (bench/lora/run.sh).

The model is transformers' own, loaded from the base folder hpctrain fine-tunes (AutoModelForSequenceClassification
with the data's labels, or AutoModelForCausalLM), wrapped by peft's get_peft_model(LoraConfig(r, lora_alpha,
lora_dropout, target_modules; task SEQ_CLS adds the classification head to modules_to_save as peft does)) unless
--lora-r 0 (full fine-tuning), in DistributedDataParallel on gloo, launched by mpirun like hpctrain (ranks from
OMPI_COMM_WORLD_*). torch.optim.AdamW (lr, weight decay 0) on the trainable parameters, the gradient norm clipped at
1 (hpctrain's and HF Trainer's default). A step: zero grads, forward of this rank's next --batch rows of the train
split (classification: padded to the batch's longest row with an attention mask, as hpctrain's dynamic padding;
causal LM: rows of one length, labels = input_ids), backward (DDP's bucketed allreduce), clipping, optimizer step;
timed on rank 0 from its start to the end of the optimizer step (the span hpctrain times as a step). After --warmup
steps, --steps steps are timed. comm_bytes: the bytes of the buckets DDP allreduced per step on this rank (counted
by a comm hook that then runs DDP's default allreduce); optimizer_state_bytes: the optimizer's state tensors
(AdamW's exp_avg and exp_avg_sq; not the scalar step counts). Rank 0 prints one JSON line.

Usage: mpirun -np N python peer.py --base DIR --data FILE.h5 --task seq-cls|causal-lm --batch B [--steps 10]
           [--warmup 2] [--threads 1] [--lr 5e-4] [--lora-r 8] [--lora-alpha 16] [--lora-dropout 0.1]
           [--target-modules query,value] [--port 29811]
"""
import argparse
import json
import os
import sys
import time

import h5py
import numpy as np
import torch
import torch.distributed as dist
from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook
from torch.nn.parallel import DistributedDataParallel

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lm"))
from torch_lm import describe, init_gloo  # noqa: E402  (bench/lm's peer: its versions line, its gloo set-up)


def parse():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", required=True)
    parser.add_argument("--data", required=True)
    parser.add_argument("--task", choices=["seq-cls", "causal-lm"], required=True)
    parser.add_argument("--batch", type=int, required=True, help="rows per rank and step")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--lr", type=float, default=5e-4)
    parser.add_argument("--lora-r", type=int, default=8, help="0: full fine-tuning, no peft")
    parser.add_argument("--lora-alpha", type=float, default=16)
    parser.add_argument("--lora-dropout", type=float, default=0.1)
    parser.add_argument("--target-modules", default="query,value")
    parser.add_argument("--port", type=int, default=29811)
    return parser.parse_args()


def load_model(args, num_labels):
    from transformers import AutoModelForCausalLM, AutoModelForSequenceClassification
    if args.task == "seq-cls":
        model = AutoModelForSequenceClassification.from_pretrained(args.base, num_labels=num_labels)
    else:
        model = AutoModelForCausalLM.from_pretrained(args.base)
    if args.lora_r > 0:
        from peft import LoraConfig, get_peft_model
        config = LoraConfig(task_type="SEQ_CLS" if args.task == "seq-cls" else "CAUSAL_LM", r=args.lora_r,
                            lora_alpha=args.lora_alpha, lora_dropout=args.lora_dropout,
                            target_modules=args.target_modules.split(","))
        model = get_peft_model(model, config)
    return model


def batches(args, rank, world):
    """This rank's batches: kwargs for the model, step after step."""
    with h5py.File(args.data, "r") as f:
        split = f["train"]
        offsets, ids = split["offsets"][:], split["input_ids"][:].astype(np.int64)
        types = split["token_type_ids"][:].astype(np.int64) if "token_type_ids" in split else None
        labels = split["labels"][:] if "labels" in split else None
        num_labels = len(json.loads(f.attrs["label_names"]))
    n = len(offsets) - 1
    needed = (args.warmup + args.steps) * args.batch * world
    assert n >= needed, f"{n} rows: too few for {args.warmup + args.steps} steps"

    def make(step):
        first = (step * world + rank) * args.batch
        rows = range(first, first + args.batch)
        width = max(int(offsets[i + 1] - offsets[i]) for i in rows)
        x = torch.zeros(args.batch, width, dtype=torch.int64)
        mask = torch.zeros(args.batch, width, dtype=torch.int64)
        t = torch.zeros(args.batch, width, dtype=torch.int64)
        for j, i in enumerate(rows):
            b, e = offsets[i], offsets[i + 1]
            x[j, :e - b], mask[j, :e - b] = torch.from_numpy(ids[b:e]), 1
            if types is not None:
                t[j, :e - b] = torch.from_numpy(types[b:e])
        if args.task == "causal-lm":
            return {"input_ids": x, "labels": x}
        kwargs = {"input_ids": x, "attention_mask": mask, "labels": torch.from_numpy(labels[list(rows)].astype(np.int64))}
        if types is not None:
            kwargs["token_type_ids"] = t
        return kwargs
    return make, num_labels


def main():
    if sys.argv[1:] == ["--describe"]:
        import peft
        describe()
        return print(f"peer: peft {peft.__version__}")
    args = parse()
    rank, world = init_gloo(args.threads, args.port)
    make, num_labels = batches(args, rank, world)
    model = load_model(args, num_labels)
    model.train()
    ddp = DistributedDataParallel(model)
    sent = [0]

    def counting_hook(state, bucket):
        sent[0] += bucket.buffer().numel() * bucket.buffer().element_size()
        return allreduce_hook(state, bucket)
    ddp.register_comm_hook(None, counting_hook)
    trainable = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trainable, lr=args.lr, weight_decay=0.0)

    times, comm = [], []
    for step in range(args.warmup + args.steps):
        batch = make(step)
        sent[0] = 0
        start = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        loss = ddp(**batch).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(trainable, 1.0)
        optimizer.step()
        if step >= args.warmup:
            times.append(time.perf_counter() - start)
            comm.append(sent[0])
    state_bytes = sum(v.numel() * v.element_size() for s in optimizer.state.values() for v in s.values()
                      if torch.is_tensor(v) and v.dim() > 0)
    if rank == 0:
        import transformers
        impl = f"transformers {transformers.__version__} + torch {torch.__version__} DDP gloo"
        if args.lora_r > 0:
            impl = f"peft {__import__('peft').__version__} + " + impl
        print(json.dumps({"impl": impl, "ranks": world, "threads": args.threads, "steps": len(times),
                          "steps_per_second": len(times) / sum(times), "step_s": sorted(times)[len(times) // 2],
                          "comm_bytes": sorted(comm)[len(comm) // 2], "optimizer_state_bytes": state_bytes,
                          "trainable_parameters": sum(p.numel() for p in trainable),
                          "parameters": sum(p.numel() for p in model.parameters()), "final_loss": loss.item()}),
              flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
