"""The denominator of MFU: measured TFLOP/s of one large matrix product on a device, in a dtype, through
PyTorch (cuBLAS on a GPU, oneDNN/BLAS on a CPU). Prints one JSON line {"device","dtype","n","tflops"}.
Median of --repeat timed products after --warmup; random operands (zeros would measure a lower power state).

Usage: gemm_peak.py [--device cuda|cpu] [--dtype bf16|fp32] [--n 8192] [--repeat 10] [--warmup 3]
"""
import argparse
import json
import statistics
import time

import torch

DTYPES = {"bf16": torch.bfloat16, "fp32": torch.float32}


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cuda")
    p.add_argument("--dtype", choices=list(DTYPES), default="bf16")
    p.add_argument("--n", type=int, default=8192)
    p.add_argument("--repeat", type=int, default=10)
    p.add_argument("--warmup", type=int, default=3)
    a = p.parse_args()
    device = torch.device(a.device)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    x = torch.randn(a.n, a.n, device=device, dtype=DTYPES[a.dtype])
    y = torch.randn(a.n, a.n, device=device, dtype=DTYPES[a.dtype])
    times = []
    for i in range(a.warmup + a.repeat):
        sync()
        start = time.perf_counter()
        torch.mm(x, y)
        sync()
        if i >= a.warmup:
            times.append(time.perf_counter() - start)
    seconds = statistics.median(times)
    print(json.dumps({"device": str(device), "dtype": a.dtype, "n": a.n, "tflops": 2 * a.n ** 3 / seconds / 1e12,
                      "spread_tflops": [2 * a.n ** 3 / t / 1e12 for t in (max(times), min(times))]}), flush=True)


if __name__ == "__main__":
    main()
