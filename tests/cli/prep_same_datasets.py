"""Exits 0 when two HDF5 dataset files hold the same datasets (names, dtypes, values); prints the first difference."""
import sys

import h5py
import numpy as np


def datasets(f):
    names = []
    f.visititems(lambda name, obj: names.append(name) if isinstance(obj, h5py.Dataset) else None)
    return names


def main(a_path, b_path):
    with h5py.File(a_path, "r") as a, h5py.File(b_path, "r") as b:
        if datasets(a) != datasets(b):
            sys.exit(f"datasets differ: {datasets(a)} vs {datasets(b)}")
        for name in datasets(a):
            if a[name].dtype != b[name].dtype or not np.array_equal(a[name][:], b[name][:]):
                sys.exit(f"{name} differs between {a_path} and {b_path}")
        if list(a.attrs["label_names"]) != list(b.attrs["label_names"]):
            sys.exit("label_names differ")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
