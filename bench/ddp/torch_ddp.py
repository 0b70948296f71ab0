"""PyTorch DDP peer of bench_train: the same benchmark models (bench/models/torch_models.py), the same step
(zero grads, forward on this rank's random batch, cross-entropy, backward with DDP's bucketed, overlapped
gloo allreduce, AdamW step), launched by mpirun like hpctrain, measured like bench_train: every step starts
from a barrier (not timed) and counts as its slowest rank's time; unsynced steps run under ddp.no_sync()
(compute only); with --sync alternate (the default) synced and unsynced steps alternate. Rank 0 prints one
JSON line like bench_train's.

Usage: mpirun -np N python3 torch_ddp.py --model distilbert|cnn [--threads T=1] [--steps S=10] [--warmup W=2]
                                         [--sync alternate|on|off] [--port P=29533]
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
    parser.add_argument("--sync", choices=["alternate", "on", "off"], default="alternate")
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
    torch.manual_seed(1 + rank)  # each rank its own batch (the model built with it is not used)
    _, inputs, labels = torch_models.build(args.model)
    model.train()

    times = {True: [], False: []}
    measured = 2 * args.steps if args.sync == "alternate" else args.steps
    for step in range(args.warmup + measured):
        sync = step % 2 == 0 if args.sync == "alternate" else args.sync == "on"
        dist.barrier()
        start = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        if sync:
            loss = nn.functional.cross_entropy(ddp(*inputs), labels)
            loss.backward()
        else:
            with ddp.no_sync():
                loss = nn.functional.cross_entropy(ddp(*inputs), labels)
                loss.backward()
        optimizer.step()
        elapsed = torch.tensor([time.perf_counter() - start], dtype=torch.float64)
        dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)  # the job's step time is its slowest rank's
        if step >= args.warmup:
            times[sync].append(elapsed.item())
    if rank == 0:
        samples = labels.size(0) * world
        result = {"impl": f"pytorch {torch.__version__} DDP gloo", "model": args.model, "ranks": world,
                  "threads": args.threads, "steps": args.steps}
        for sync, key in ((True, "on"), (False, "off")):
            if times[sync]:
                median = statistics.median(times[sync])
                result[key] = {"median_s": median, "samples_per_s": samples / median, "min_s": min(times[sync])}
        print(json.dumps(result), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
