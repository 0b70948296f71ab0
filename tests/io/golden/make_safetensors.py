#!/usr/bin/python3
"""Writes reference.safetensors, the golden file tests/io/golden_test.cpp reads.

Run from anywhere with the system Python (torch 1.13 + numpy; the `safetensors` package is not needed):
    /usr/bin/python3 tests/io/golden/make_safetensors.py

The file is written byte by byte as safetensors' own writer (Rust `prepare()` behind
`safetensors.torch.save_file`) lays it out: an 8-byte little-endian header length; the header, compact
JSON with "__metadata__" first and then the tensors in data order, padded with spaces to a multiple of
8 bytes; then the tensor bytes, sorted by dtype descending in the Rust enum order
(BOOL < U8 < I8 < I16 < F16 < BF16 < I32 < F32 < F64 < I64), then by name.

Contents:
  - one small tensor per dtype with known values (the C++ test hard-codes the same values);
  - a scalar and an empty tensor;
  - conversion goldens computed by torch itself: conv.source (F32: edge cases, ties, subnormals,
    overflow, random values over many magnitudes, random bit patterns), conv.f16 / conv.bf16 =
    source.to(torch.float16 / torch.bfloat16) and conv.f16_to_f32 / conv.bf16_to_f32 = their upcasts.
"""
import json
import os
import struct

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "reference.safetensors")

DTYPES = {  # torch dtype -> (safetensors name, rank in the Rust Dtype enum)
    torch.bool: ("BOOL", 0),
    torch.uint8: ("U8", 1),
    torch.int8: ("I8", 2),
    torch.int16: ("I16", 5),
    torch.float16: ("F16", 7),
    torch.bfloat16: ("BF16", 8),
    torch.int32: ("I32", 9),
    torch.float32: ("F32", 11),
    torch.float64: ("F64", 12),
    torch.int64: ("I64", 13),
}


def tensor_bytes(t):
    t = t.contiguous()
    if t.dtype == torch.bfloat16:  # numpy has no bfloat16: take the raw 16-bit patterns
        return t.view(torch.int16).numpy().tobytes()
    return t.numpy().tobytes()


def save(path, tensors, metadata):
    order = sorted(tensors, key=lambda name: (-DTYPES[tensors[name].dtype][1], name))
    header = {}
    if metadata is not None:
        header["__metadata__"] = metadata
    offset = 0
    blobs = []
    for name in order:
        t = tensors[name]
        blob = tensor_bytes(t)
        header[name] = {"dtype": DTYPES[t.dtype][0], "shape": list(t.shape), "data_offsets": [offset, offset + len(blob)]}
        offset += len(blob)
        blobs.append(blob)
    text = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for blob in blobs:
            f.write(blob)


def known_values():
    return {
        "known.f64": torch.tensor([0.0, -1.5, 1e300, 3.141592653589793], dtype=torch.float64),
        "known.f32": torch.tensor([[1.0, -2.5], [3.4028234663852886e38, 1.401298464324817e-45]], dtype=torch.float32),
        "known.f16": torch.tensor([1.0, -2.0, 65504.0, 2.0**-14, 2.0**-24], dtype=torch.float16),
        "known.bf16": torch.tensor([1.0, -2.0, 0.1, 3.3895313892515355e38], dtype=torch.bfloat16),
        "known.i64": torch.tensor([-(2**63), -1, 0, 2**63 - 1], dtype=torch.int64),
        "known.i32": torch.tensor([[-(2**31), -1], [0, 2**31 - 1]], dtype=torch.int32),
        "known.i16": torch.tensor([-32768, -1, 0, 32767], dtype=torch.int16),
        "known.i8": torch.tensor([-128, -1, 0, 127], dtype=torch.int8),
        "known.u8": torch.tensor([0, 1, 128, 255], dtype=torch.uint8),
        "known.bool": torch.tensor([True, False, True], dtype=torch.bool),
        "known.scalar": torch.tensor(42.0, dtype=torch.float32),
        "known.empty": torch.zeros((0, 3), dtype=torch.float32),
    }


def conversion_source():
    inf = float("inf")
    edges = [
        0.0, -0.0, inf, -inf, float("nan"), 1.0, -1.0,
        65504.0, 65519.0, 65519.99, 65520.0, 65536.0, 1e6, -1e6,             # half overflow boundary
        2.0**-14, 2.0**-14 * (1 - 2.0**-11), 2.0**-24, 2.0**-25, 2.0**-25 * (1 + 2.0**-20), 3 * 2.0**-26,
        2.0**-26, 1e-10, 1.401298464324817e-45, 1.1754943508222875e-38, 3.4028234663852886e38,
        1 + 2.0**-11, 1 + 3 * 2.0**-11, 1 + 2.0**-8, 1 + 3 * 2.0**-8,         # exact ties for f16 / bf16
        1 + 2.0**-8 + 2.0**-20, 0.1, 1.0 / 3.0, 2.0 / 3.0, 1000.5, 2049.0, 4097.0,
    ]
    edges += [-x for x in edges[5:]]
    generator = torch.Generator().manual_seed(20240229)
    magnitudes = torch.pow(10.0, torch.empty(1100).uniform_(-9, 6, generator=generator))
    randoms = torch.randn(1100, generator=generator) * magnitudes
    bits = torch.randint(-(2**31), 2**31 - 1, (800,), dtype=torch.int64, generator=generator).to(torch.int32)
    return torch.cat([torch.tensor(edges, dtype=torch.float32), randoms.float(), bits.view(torch.float32)])


def main():
    tensors = known_values()
    source = conversion_source()
    f16 = source.to(torch.float16)
    bf16 = source.to(torch.bfloat16)
    tensors.update({
        "conv.source": source,
        "conv.f16": f16,
        "conv.bf16": bf16,
        "conv.f16_to_f32": f16.to(torch.float32),
        "conv.bf16_to_f32": bf16.to(torch.float32),
    })
    save(OUT, tensors, {"format": "pt"})
    print(f"wrote {OUT}: {os.path.getsize(OUT)} bytes, {len(tensors)} tensors, torch {torch.__version__}")


if __name__ == "__main__":
    main()
