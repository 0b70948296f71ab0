"""Compares two safetensors files tensor by tensor (stdlib + numpy, no safetensors package needed).

usage: compare_weights.py A B TOLERANCE   -> exit 0 when max |a-b| / max |a| <= TOLERANCE, both maxima taken over
                                            every element of every tensor (the relative difference of the whole
                                            parameter vector in the infinity norm). Per tensor it would be
                                            meaningless for tensors whose exact gradient is zero (e.g. attention's
                                            key bias: softmax ignores it), which float rounding and Adam's
                                            normalization turn into noise of either sign.
       compare_weights.py A B TOLERANCE --skip PART
                                          -> the same over the tensors whose name does not contain PART (e.g.
                                            k_lin.bias, whose exact gradient is zero: an optimizer that normalizes
                                            its update, such as Adafactor, turns its rounding noise into steps)
       compare_weights.py A B TOLERANCE --skip PART[START:END]
                                          -> elements START..END-1 (of the flattened tensor) of the tensors whose
                                            name contains PART left out, the rest compared (GPT-2's fused
                                            c_attn.bias holds the key bias in [n_embd, 2 n_embd))
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
    if len(sys.argv) > 5 and sys.argv[4] == "--skip":
        part, _, piece = sys.argv[5].partition("[")
        if piece:  # PART[START:END]: those elements out, the rest kept
            start, end = (int(x) for x in piece.rstrip("]").split(":"))
            def cut(t):
                flat = t.reshape(-1)
                return np.concatenate([flat[:start], flat[end:]])
            a = {k: cut(v) if part in k else v for k, v in a.items()}
            b = {k: cut(v) if part in k else v for k, v in b.items()}
        else:
            a = {k: v for k, v in a.items() if part not in k}
            b = {k: v for k, v in b.items() if part not in k}
    if sorted(a) != sorted(b):
        print("different tensor names:", sorted(set(a) ^ set(b)))
        return 1
    scale = max(max(float(np.abs(t.astype(np.float64)).max()) for t in a.values() if t.size), 1e-12)
    worst, worst_name = 0.0, ""
    for name in a:
        diff = float(np.abs(a[name].astype(np.float64) - b[name].astype(np.float64)).max()) if a[name].size else 0.0
        if diff > worst:
            worst, worst_name = diff, name
    worst /= scale
    print(f"max relative difference {worst:.3g} ({worst_name or 'all equal'}; scale {scale:.3g}), tolerance {tolerance:g}")
    return 0 if worst <= tolerance else 1


if __name__ == "__main__":
    sys.exit(main())
