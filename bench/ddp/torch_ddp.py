"""PyTorch DDP peer of bench_train: the same benchmark models (bench/models/torch_models.py), the same step
(zero grads, forward on this rank's random batch, cross-entropy, backward with DDP's bucketed, overlapped
gloo allreduce, AdamW step), launched by mpirun like hpctrain. With --sync off every step runs under
ddp.no_sync() (compute only). Rank 0 prints one JSON line like bench_train's.

Usage: mpirun -np N python3 torch_ddp.py --model distilbert|cnn [--threads T=1] [--steps S=10] [--warmup W=2]
                                         [--sync on|off] [--port P=29533]
"""
import datetime
import json
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "models"))
import torch_models  # noqa: E402


def main():
    parser = torch_models.argument_parser(__doc__.splitlines()[0], steps=10, warmup=2)
    parser.add_argument("--sync", choices=["on", "off"], default="on")
    parser.add_argument("--port", type=int, default=29533)
    args = parser.parse_args()

    rank = int(os.environ.get("OMPI_COMM_WORLD_RANK", os.environ.get("PMI_RANK", "0")))
    world = int(os.environ.get("OMPI_COMM_WORLD_SIZE", os.environ.get("PMI_SIZE", "1")))
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{args.port}", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=120))
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model, _, _ = torch_models.build(args.model)
    ddp = DistributedDataParallel(model)  # broadcasts rank 0's parameters; buckets 25 MiB, first 1 MiB
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.0)
    torch.manual_seed(1 + rank)  # each rank its own batch (the closure's own model is not used)
    _, run_batch, labels = torch_models.build(args.model)
    model.train()

    times = []
    dist.barrier()
    for step in range(args.warmup + args.steps):
        start = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        if args.sync == "on":
            loss = nn.functional.cross_entropy(run_batch(ddp), labels)
            loss.backward()
        else:
            with ddp.no_sync():
                loss = nn.functional.cross_entropy(run_batch(ddp), labels)
                loss.backward()
        optimizer.step()
        stop = time.perf_counter()
        if step >= args.warmup:
            times.append(stop - start)
    # The job's step time is its slowest rank's.
    median = torch.tensor([statistics.median(times)], dtype=torch.float64)
    dist.all_reduce(median, op=dist.ReduceOp.MAX)
    if rank == 0:
        batch = labels.size(0)
        print(json.dumps({"impl": f"pytorch {torch.__version__} DDP gloo", "model": args.model, "ranks": world,
                          "threads": args.threads, "sync": args.sync == "on", "steps": args.steps,
                          "median_s": median.item(), "samples_per_s": batch * world / median.item()}), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
