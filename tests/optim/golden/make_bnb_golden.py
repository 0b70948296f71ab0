#!/usr/bin/env python3
"""Writes bnb_8bit.safetensors: goldens from the real bitsandbytes for tests/optim/bnb_golden_test.cpp.

Run with an interpreter that has torch, bitsandbytes and safetensors (bitsandbytes' CPU backend suffices):
    .venv-torch2/bin/python tests/optim/golden/make_bnb_golden.py
Contents (all CPU, float32 unless noted):
  map.signed, map.unsigned          functional.create_dynamic_map(signed=True / False), 256 values each
  quant.input                       1,024 values in 4 blocks of 256 (a zero block, a negative block, tiny values)
  quant.{signed,unsigned}.codes     functional.quantize_blockwise(x, code=map, blocksize=256) (uint8;
  quant.{signed,unsigned}.absmax    unsigned quantizes |x|), one absmax per block
  quant.{signed,unsigned}.dequant   functional.dequantize_blockwise of those codes
  adamw.p0, adamw.g1, adamw.g2      a 4,500-element parameter (8-bit state: >= min_8bit_size 4,096, tail
                                    block of 148) and its gradients for two steps
  adamw.small.p0/.g1/.g2            a 1,000-element parameter (under min_8bit_size: fp32 state)
  adamw.step{1,2}.{p,state1,absmax1,state2,absmax2}  bnb.optim.AdamW8bit(lr=1e-3, weight_decay=0.01)
                                    after each step; adamw.small.step{1,2}.{p,state1,state2} likewise
"""
import pathlib

import bitsandbytes as bnb
import bitsandbytes.functional as F
import torch
from safetensors.torch import save_file

OUT = pathlib.Path(__file__).with_name("bnb_8bit.safetensors")


def quant_input():
    g = torch.Generator().manual_seed(7)
    x = torch.randn(1024, generator=g) * torch.rand(1024, generator=g) ** 4
    x[256:512] = 0.0                       # an all-zero block (absmax 0)
    x[512:768] = -x[512:768].abs()         # a block whose absmax is negative-signed
    x[768:1024] *= 1e-6                    # tiny values (the map's low decades)
    return x


def quantization_goldens(out):
    x = quant_input()
    out["quant.input"] = x
    for name, signed in (("signed", True), ("unsigned", False)):
        code = F.create_dynamic_map(signed=signed)
        out[f"map.{name}"] = code
        values = x if signed else x.abs()
        codes, state = F.quantize_blockwise(values, code=code, blocksize=256)
        out[f"quant.{name}.codes"] = codes
        out[f"quant.{name}.absmax"] = state.absmax
        out[f"quant.{name}.dequant"] = F.dequantize_blockwise(codes, state)


def optimizer_goldens(out):
    g = torch.Generator().manual_seed(11)
    big = torch.nn.Parameter(torch.randn(4500, generator=g))
    small = torch.nn.Parameter(torch.randn(1000, generator=g))
    out["adamw.p0"], out["adamw.small.p0"] = big.detach().clone(), small.detach().clone()
    opt = bnb.optim.AdamW8bit([big, small], lr=1e-3, weight_decay=0.01)
    for step in (1, 2):
        big.grad = torch.randn(4500, generator=g) * 0.1
        small.grad = torch.randn(1000, generator=g) * 0.1
        out[f"adamw.g{step}"], out[f"adamw.small.g{step}"] = big.grad.clone(), small.grad.clone()
        opt.step()
        prefix = f"adamw.step{step}"
        out[f"{prefix}.p"] = big.detach().clone()
        for key in ("state1", "absmax1", "state2", "absmax2"):
            out[f"{prefix}.{key}"] = opt.state[big][key].clone()
        small_prefix = f"adamw.small.step{step}"
        out[f"{small_prefix}.p"] = small.detach().clone()
        for key in ("state1", "state2"):
            out[f"{small_prefix}.{key}"] = opt.state[small][key].clone()


def main():
    out = {}
    quantization_goldens(out)
    optimizer_goldens(out)
    metadata = {"bitsandbytes": bnb.__version__, "torch": torch.__version__}
    save_file({k: v.contiguous() for k, v in out.items()}, str(OUT), metadata=metadata)
    print(f"wrote {OUT} ({OUT.stat().st_size} bytes), {metadata}")


if __name__ == "__main__":
    main()
