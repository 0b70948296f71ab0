"""Sets every element of tensors of a .safetensors file to a value (nan, inf, or a number), for tests.

usage: edit_weights.py FILE.safetensors TENSOR=VALUE...   (FILE is replaced through a temporary)
"""
import json
import os
import struct
import sys

import numpy as np

DTYPES = {"F32": np.float32, "F16": np.float16, "F64": np.float64}


def main(path, edits):
    with open(path, "rb") as f:
        blob = bytearray(f.read())
    (header_len,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8 : 8 + header_len])
    base = 8 + header_len
    for edit in edits:
        tensor, value = edit.split("=")
        entry = header[tensor]
        begin, end = entry["data_offsets"]
        dtype = DTYPES[entry["dtype"]]
        blob[base + begin : base + end] = np.full((end - begin) // np.dtype(dtype).itemsize, float(value), dtype).tobytes()
    with open(path + ".edit", "wb") as f:
        f.write(blob)
    os.replace(path + ".edit", path)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
