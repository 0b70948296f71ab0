"""transformers + PyTorch DDP peer of `hpctrain train` on a causal-lm file (bench/lm/run.sh).

The model is transformers' own: `AutoModelForCausalLM.from_config(config.json, attn_implementation="sdpa")`, the
config hpctrain trains from, in DistributedDataParallel on gloo (launched by mpirun like hpctrain, ranks from
OMPI_COMM_WORLD_*); torch.optim.AdamW (lr 1e-4, weight decay 0) with the gradient norm clipped at 1 (hpctrain's and HF
Trainer's default); bf16 is torch.autocast("cpu", bfloat16) around forward and loss, as a PyTorch user writes it.
A step: zero grads, forward of this rank's next --batch rows of the file's train split with labels = input_ids
(transformers' shifted mean next-token loss), backward (DDP's bucketed, overlapped allreduce), clipping, optimizer
step; timed on rank 0 from its start to the end of the optimizer step, the span hpctrain times as a step. After
--warmup steps, --steps steps are timed: tokens/s = the global batch's input tokens x steps / their summed time.
MFU: Note [Model FLOPs]'s 6 N + 12 L d T per token (model_flops(): src/models/model_flops.cpp's formula) x tokens/s
over --peak-gflops x ranks (run.sh divides by the peak hpctrain measured instead). Rank 0 prints one JSON line.

Usage: python torch_lm.py --describe   (one line: the versions, ATen's CPU capability, BLAS, oneDNN)
       mpirun -np N python torch_lm.py --config gpt2.json --data lm.h5 --batch B [--steps S=20] [--warmup W=3]
           [--threads T=1] [--mixed-precision no|bf16] [--peak-gflops G] [--port P=29711]
"""
import argparse
import datetime
import json
import os
import sys
import time

import h5py
import numpy as np
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from transformers import AutoConfig, AutoModelForCausalLM


def parse():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True)
    parser.add_argument("--data", required=True)
    parser.add_argument("--batch", type=int, required=True, help="rows per rank and step")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--mixed-precision", choices=["no", "bf16"], default="no")
    parser.add_argument("--peak-gflops", type=float, default=0, help="a rank's peak GFLOP/s (0: no MFU)")
    parser.add_argument("--port", type=int, default=29711)
    return parser.parse_args()


def model_flops(config, context):
    """Note [Model FLOPs] (src/models/model_flops.cpp): training FLOPs per token at `context` tokens per row."""
    if config.model_type == "gpt2":
        d, layers, f = config.n_embd, config.n_layer, config.n_inner or 4 * config.n_embd
        matmul, width = layers * (4 * d * d + 2 * d * f) + config.vocab_size * d, d
    else:  # llama, qwen2
        d, layers, f = config.hidden_size, config.num_hidden_layers, config.intermediate_size
        head = getattr(config, "head_dim", None) or d // config.num_attention_heads
        q, kv = config.num_attention_heads * head, config.num_key_value_heads * head
        matmul, width = layers * (2 * d * q + 2 * d * kv + 3 * d * f) + config.vocab_size * d, q
    return 6.0 * matmul + 12.0 * layers * width * context


def load_config(path):
    values = json.load(open(path))
    return AutoConfig.for_model(values.pop("model_type"), **values)


def describe():
    import transformers
    blas = "MKL" if "USE_MKL=ON" in torch.__config__.show() else "not MKL"
    print(f"peer: torch {torch.__version__}, transformers {transformers.__version__}, ATen CPU capability "
          f"{torch.backends.cpu.get_cpu_capability()}, BLAS {blas}, oneDNN {torch.backends.mkldnn.is_available()}")


def init_gloo(threads, port):
    """Rank and world size from mpirun's environment, a gloo process group on 127.0.0.1:port, torch's threads and
    seed set; returns (rank, world). bench/lora/peer.py uses it too."""
    rank = int(os.environ.get("OMPI_COMM_WORLD_RANK", "0"))
    world = int(os.environ.get("OMPI_COMM_WORLD_SIZE", "1"))
    torch.set_num_threads(threads)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=300))
    torch.manual_seed(0)
    return rank, world


def main():
    if sys.argv[1:] == ["--describe"]:
        return describe()
    args = parse()
    rank, world = init_gloo(args.threads, args.port)
    config = load_config(args.config)
    model = AutoModelForCausalLM.from_config(config, attn_implementation="sdpa")
    model.train()
    ddp = DistributedDataParallel(model)  # broadcasts rank 0's parameters; buckets 25 MiB, the first 1 MiB
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.0)
    autocast = torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.mixed_precision == "bf16")

    with h5py.File(args.data, "r") as f:
        offsets, ids = f["train/offsets"][:], f["train/input_ids"][:]
    length = int(offsets[1] - offsets[0])
    assert (np.diff(offsets) == length).all(), "expected rows of one length (prep lm --block-size)"
    rows = torch.from_numpy(ids.astype(np.int64)).view(-1, length)
    total = args.warmup + args.steps
    assert rows.shape[0] >= total * args.batch * world, f"{rows.shape[0]} rows: too few for {total} steps"

    times = []
    for step in range(total):
        first = (step * world + rank) * args.batch
        batch = rows[first:first + args.batch]
        start = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        with autocast:
            loss = ddp(input_ids=batch, labels=batch).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)  # as hpctrain's and HF Trainer's default
        optimizer.step()
        if step >= args.warmup:
            times.append(time.perf_counter() - start)
    if rank == 0:
        tokens = args.batch * length * world * len(times)
        tokens_per_second = tokens / sum(times)
        flops = model_flops(config, length)
        result = {"impl": f"transformers {__import__('transformers').__version__} + torch {torch.__version__} DDP gloo",
                  "model": config.model_type, "ranks": world, "threads": args.threads,
                  "mixed_precision": args.mixed_precision, "batch_per_rank": args.batch, "seq_length": length,
                  "steps": len(times), "tokens_per_second": tokens_per_second, "step_s": sorted(times)[len(times) // 2],
                  "parameters": sum(p.numel() for p in model.parameters()), "flops_per_token": flops,
                  "final_loss": loss.item()}
        if args.peak_gflops > 0:
            result["mfu"] = flops * tokens_per_second / (args.peak_gflops * 1e9 * world)
        print(json.dumps(result), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
