"""PyTorch DDP peer of bench_train: the same benchmark models (bench/models/torch_models.py), the same step
(zero grads, forward on this rank's random batch, cross-entropy, backward with DDP's bucketed, overlapped
gloo allreduce, AdamW step), launched by mpirun like hpctrain, measured like bench_train: every step starts
from a barrier (not timed) and counts as its slowest rank's time; unsynced steps run under ddp.no_sync()
(compute only); with --sync alternate (the default) synced and unsynced steps alternate. Rank 0 prints one
JSON line like bench_train's.

The techniques of bench/efficient/run.sh, as a PyTorch user writes them: --mixed-precision bf16 wraps forward
and loss in torch.autocast("cpu", bfloat16); --gradient-checkpointing on runs every transformer block through
torch.utils.checkpoint (non-reentrant); --accumulation N runs N micro-batches per step, all but the last under
ddp.no_sync(), the loss divided by N; --local-sgd-steps K runs every step under no_sync() and averages the
parameters every K optimizer steps with torch.distributed's PeriodicModelAverager (what PostLocalSGD does
after its warm-up). Memory, after the timed steps, from one more synced micro-batch under the profiler
(profile_memory): "activation_peak_bytes" and "activation_kept_bytes", the bytes LibTorch's CPU allocator handed
out above the level before forward at their peak during forward and backward and still held when forward
returned; "peak_rss_bytes" is VmHWM; each the largest rank's.

Usage: mpirun -np N python3 torch_ddp.py --model distilbert|cnn [--threads T=1] [--steps S=10] [--warmup W=2]
           [--sync alternate|on|off] [--port P=29533] [--mixed-precision no|bf16] [--gradient-checkpointing on|off]
           [--accumulation N=1] [--local-sgd-steps K=0] [--seq-length L=128] [--batch B]
"""
import datetime
import json
import os
import statistics
import sys
import tempfile
import time

import torch
import torch.distributed as dist
import torch.utils.checkpoint
from torch import nn
from torch.distributed.algorithms.model_averaging.averagers import PeriodicModelAverager
from torch.nn.parallel import DistributedDataParallel

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "models"))
import torch_models  # noqa: E402


class Checkpointed(nn.Module):
    """One transformer block recomputed in backward (Transformers' gradient_checkpointing_enable())."""

    def __init__(self, block):
        super().__init__()
        self.block = block

    def forward(self, x, mask):
        return torch.utils.checkpoint.checkpoint(self.block, x, mask, use_reentrant=False)


def parse():
    parser = torch_models.argument_parser(__doc__.splitlines()[0], steps=10, warmup=2)
    parser.add_argument("--sync", choices=["alternate", "on", "off"], default="alternate")
    parser.add_argument("--port", type=int, default=29533)
    parser.add_argument("--mixed-precision", choices=["no", "bf16"], default="no")
    parser.add_argument("--gradient-checkpointing", choices=["on", "off"], default="off")
    parser.add_argument("--accumulation", type=int, default=1)
    parser.add_argument("--local-sgd-steps", type=int, default=0)
    parser.add_argument("--seq-length", type=int, default=128)
    parser.add_argument("--batch", type=int, default=None)
    return parser.parse_args()


class Job:
    """The prepared model, optimizer and this rank's batch, and one step of them."""

    def __init__(self, args, rank):
        torch.manual_seed(0)
        self.model, _, _ = torch_models.build(args.model, args.batch, args.seq_length)
        if args.gradient_checkpointing == "on":
            layers = self.model.distilbert.transformer.layer
            for i, block in enumerate(layers):
                layers[i] = Checkpointed(block)
        self.ddp = DistributedDataParallel(self.model)  # broadcasts rank 0's parameters; buckets 25 MiB, first 1 MiB
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=1e-4, weight_decay=0.0)
        self.averager = PeriodicModelAverager(period=args.local_sgd_steps) if args.local_sgd_steps > 0 else None
        torch.manual_seed(1 + rank)  # each rank its own batch (the model built with it is not used)
        _, self.inputs, self.labels = torch_models.build(args.model, args.batch, args.seq_length)
        self.autocast = torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.mixed_precision == "bf16")
        self.accumulation = args.accumulation
        self.model.train()

    def micro_batch(self, sync):
        """Forward and backward of one micro-batch, gradients reduced when `sync`."""
        with (torch.enable_grad() if sync else self.ddp.no_sync()):
            with self.autocast:
                loss = nn.functional.cross_entropy(self.ddp(*self.inputs), self.labels) / self.accumulation
            with torch.profiler.record_function("bench_backward"):
                loss.backward()

    def step(self, sync):
        self.optimizer.zero_grad(set_to_none=True)
        for micro in range(self.accumulation):
            self.micro_batch(sync and micro == self.accumulation - 1 and self.averager is None)
        self.optimizer.step()
        if self.averager is not None:
            self.averager.average_parameters(self.model.parameters())

    def memory(self):
        """Allocator bytes of one synced micro-batch (peak, kept at the end of forward) and VmHWM, this rank's."""
        self.optimizer.zero_grad(set_to_none=True)
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], profile_memory=True) as prof:
            self.micro_batch(self.averager is None)
        with tempfile.NamedTemporaryFile(suffix=".json") as trace:
            prof.export_chrome_trace(trace.name)
            events = json.load(open(trace.name))["traceEvents"]
        backward = min(e["ts"] for e in events if e.get("name") == "bench_backward")
        live = peak = kept = 0
        for e in sorted((e for e in events if e.get("name") == "[memory]"), key=lambda e: e["ts"]):
            live += e["args"]["Bytes"]
            peak = max(peak, live)
            kept = live if e["ts"] < backward else kept
        rss = next(int(line.split()[1]) * 1024 for line in open("/proc/self/status") if line.startswith("VmHWM:"))
        return [float(peak), float(kept), float(rss)]


def main():
    args = parse()
    rank = int(os.environ.get("OMPI_COMM_WORLD_RANK", os.environ.get("PMI_RANK", "0")))
    world = int(os.environ.get("OMPI_COMM_WORLD_SIZE", os.environ.get("PMI_SIZE", "1")))
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{args.port}", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=120))
    torch.set_num_threads(args.threads)
    job = Job(args, rank)

    times = {True: [], False: []}
    measured = 2 * args.steps if args.sync == "alternate" else args.steps
    for step in range(args.warmup + measured):
        sync = step % 2 == 0 if args.sync == "alternate" else args.sync == "on"
        dist.barrier()
        start = time.perf_counter()
        job.step(sync)
        elapsed = torch.tensor([time.perf_counter() - start], dtype=torch.float64)
        dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)  # the job's step time is its slowest rank's
        if step >= args.warmup:
            times[sync].append(elapsed.item())
    memory = torch.tensor(job.memory(), dtype=torch.float64)
    dist.all_reduce(memory, op=dist.ReduceOp.MAX)
    if rank == 0:
        samples = job.labels.size(0) * args.accumulation * world
        result = {"impl": f"pytorch {torch.__version__} DDP gloo", "model": args.model, "ranks": world,
                  "threads": args.threads, "steps": args.steps, "mixed_precision": args.mixed_precision,
                  "gradient_checkpointing": args.gradient_checkpointing == "on", "accumulation": args.accumulation,
                  "local_sgd_steps": args.local_sgd_steps, "seq_length": args.seq_length, "batch": job.labels.size(0),
                  "memory": dict(zip(("activation_peak_bytes", "activation_kept_bytes", "peak_rss_bytes"),
                                     memory.tolist()))}
        for sync, key in ((True, "on"), (False, "off")):
            if times[sync]:
                median, mean = statistics.median(times[sync]), statistics.fmean(times[sync])
                result[key] = {"median_s": median, "samples_per_s": samples / median, "min_s": min(times[sync]),
                               "mean_s": mean, "samples_per_s_mean": samples / mean}
        print(json.dumps(result), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
