"""Compares two safetensors files tensor by tensor (stdlib + numpy, no safetensors package needed).

usage: compare_weights.py A B TOLERANCE   -> exit 0 when every tensor's max |a-b| / max |a| <= TOLERANCE
       compare_weights.py --layout FILE   -> prints the header's tensor names and metadata as JSON
"""
import json
import struct
import sys

import numpy as np

DTYPES = {"F32": np.float32, "F64": np.float64, "F16": np.float16, "I64": np.int64, "I32": np.int32, "U8": np.uint8,
          "BOOL": np.bool_}


def read(path):
    with open(path, "rb") as f:
        data = f.read()
    (header_len,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + header_len])
    base = 8 + header_len
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        start, end = info["data_offsets"]
        tensors[name] = np.frombuffer(data[base + start:base + end], dtype=DTYPES[info["dtype"]]).reshape(info["shape"])
    return header.get("__metadata__", {}), tensors


def main():
    if sys.argv[1] == "--layout":
        metadata, tensors = read(sys.argv[2])
        print(json.dumps({"metadata": metadata, "names": sorted(tensors)}))
        return 0
    _, a = read(sys.argv[1])
    _, b = read(sys.argv[2])
    tolerance = float(sys.argv[3])
    if sorted(a) != sorted(b):
        print("different tensor names:", sorted(set(a) ^ set(b)))
        return 1
    worst, worst_name = 0.0, ""
    for name in a:
        x, y = a[name].astype(np.float64), b[name].astype(np.float64)
        scale = max(np.abs(x).max(), 1e-12)
        diff = float(np.abs(x - y).max() / scale)
        if diff > worst:
            worst, worst_name = diff, name
    print(f"max relative difference {worst:.3g} ({worst_name or 'all equal'}), tolerance {tolerance:g}")
    return 0 if worst <= tolerance else 1


if __name__ == "__main__":
    sys.exit(main())
