"""Reads TensorBoard event files from the format description alone (Python standard library only), checks them
against metrics.jsonl, and (when the interpreter has the `tensorboard` package) reads them again with
TensorBoard's own EventAccumulator.  Usage: read_tfevents.py RUN_FOLDER

Format: a TFRecord file is a sequence of records
    uint64 length (little endian) | uint32 masked_crc32c(length bytes) | data | uint32 masked_crc32c(data)
with masked_crc32c(x) = ((c >> 15) | (c << 17)) + 0xa282ead8 (mod 2^32), c = CRC-32C (Castagnoli) of x.
Each data is a tensorflow.Event protobuf: wall_time = 1 (double), step = 2 (int64), file_version = 3 (string),
summary = 5 (Summary: repeated Value value = 1; Value: tag = 1 string, simple_value = 2 float),
session_log = 7 (SessionLog: status = 1, START = 1). A SessionLog START at step S drops the values of earlier
records with step >= S (how TensorBoard reads a restarted run).
Prints one line per problem and exits 1 if there is any; "tensorboard: skipped ..." when the package is absent.
"""
import glob
import json
import math
import os
import struct
import sys

CASTAGNOLI_REFLECTED = 0x82F63B78


def crc32c(data):
    """Bit by bit (no table): independent of the program's implementation."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ CASTAGNOLI_REFLECTED if crc & 1 else crc >> 1
    return crc ^ 0xFFFFFFFF


def masked(data):
    c = crc32c(data)
    return ((((c >> 15) | (c << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


assert crc32c(b"123456789") == 0xE3069283


def records(path, problems):
    data = open(path, "rb").read()
    at = 0
    while at < len(data):
        if len(data) - at < 12:
            problems.append(f"{path}: {len(data) - at} trailing bytes at offset {at}")
            return
        header = data[at:at + 8]
        (length,) = struct.unpack("<Q", header)
        (length_crc,) = struct.unpack("<I", data[at + 8:at + 12])
        if length_crc != masked(header):
            problems.append(f"{path}: offset {at}: length CRC {length_crc:#x}, expected {masked(header):#x}")
        body = data[at + 12:at + 12 + length]
        (body_crc,) = struct.unpack("<I", data[at + 12 + length:at + 16 + length])
        if body_crc != masked(body):
            problems.append(f"{path}: offset {at}: data CRC {body_crc:#x}, expected {masked(body):#x}")
        yield body
        at += 16 + length


def varint(buf, at):
    value, shift = 0, 0
    while True:
        byte = buf[at]
        value |= (byte & 0x7F) << shift
        at, shift = at + 1, shift + 7
        if not byte & 0x80:
            return value, at


def fields(buf):
    """(field number, wire type, value) of one message; value: int, bytes, or raw 8/4 bytes."""
    at = 0
    while at < len(buf):
        key, at = varint(buf, at)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, at = varint(buf, at)
        elif wire == 1:
            value, at = buf[at:at + 8], at + 8
        elif wire == 2:
            size, at = varint(buf, at)
            value, at = buf[at:at + size], at + size
        elif wire == 5:
            value, at = buf[at:at + 4], at + 4
        else:
            raise ValueError(f"wire type {wire}")
        yield number, wire, value


def decode_event(body):
    event = {"step": 0, "values": [], "file_version": None, "session_start": False, "wall_time": None}
    for number, wire, value in fields(body):
        if number == 1 and wire == 1:
            event["wall_time"] = struct.unpack("<d", value)[0]
        elif number == 2 and wire == 0:
            event["step"] = value - (1 << 64) if value >= 1 << 63 else value
        elif number == 3 and wire == 2:
            event["file_version"] = value.decode()
        elif number == 5 and wire == 2:
            for n, w, entry in fields(value):
                if n == 1 and w == 2:
                    parts = {k: v for k, _, v in fields(entry)}
                    event["values"].append((parts[1].decode(), struct.unpack("<f", parts[2])[0]))
        elif number == 7 and wire == 2:
            event["session_start"] = any(n == 1 and v == 1 for n, _, v in fields(value))
    return event


def read_run(folder, problems):
    """{(tag, step): value} over the event files in name order, START purges applied."""
    scalars = {}
    files = sorted(glob.glob(os.path.join(folder, "runs", "events.out.tfevents.*")))
    for path in files:
        events = [decode_event(body) for body in records(path, problems)]
        if not events or events[0]["file_version"] != "brain.Event:2":
            problems.append(f"{path}: the first event is not file_version brain.Event:2")
        for event in events:
            if event["session_start"]:
                scalars = {k: v for k, v in scalars.items() if k[1] < event["step"]}
            for tag, value in event["values"]:
                scalars[(tag, event["step"])] = value
    return files, scalars


TRAIN = {"loss": "train/loss", "lr": "train/learning_rate", "grad_norm": "train/grad_norm",
         "samples_per_second": "train/samples_per_second", "epoch": "train/epoch", "loss_scale": "train/loss_scale",
         "tokens_per_second": "train/tokens_per_second", "mfu": "train/mfu",  # these two: causal LMs
         "optimizer_state_bytes": "train/optimizer_state_bytes"}
EVAL = {"eval_loss": "eval/loss", "eval_accuracy": "eval/accuracy", "eval_macro_f1": "eval/macro_f1",
        "eval_perplexity": "eval/perplexity", "epoch": "eval/epoch"}


def expected_from_metrics(folder):
    expected = {}
    for line in open(os.path.join(folder, "metrics.jsonl")):
        entry = json.loads(line)
        names = EVAL if "eval_loss" in entry else TRAIN
        for key, tag in names.items():
            if key in entry:
                value = entry[key]
                expected[(tag, entry["step"])] = math.nan if value is None else struct.unpack("<f", struct.pack("<f", value))[0]
    return expected


def same(a, b):
    return (math.isnan(a) and math.isnan(b)) or a == b


def compare(label, got, expected, problems):
    for key in sorted(set(got) | set(expected)):
        if key not in got:
            problems.append(f"{label}: {key} is in metrics.jsonl, not in the events")
        elif key not in expected:
            problems.append(f"{label}: {key} is in the events, not in metrics.jsonl")
        elif not same(got[key], expected[key]):
            problems.append(f"{label}: {key} = {got[key]!r}, metrics.jsonl has {expected[key]!r}")


def read_with_tensorboard(folder):
    from tensorboard.backend.event_processing import event_accumulator
    accumulator = event_accumulator.EventAccumulator(os.path.join(folder, "runs"), size_guidance={"scalars": 0})
    accumulator.Reload()
    return {(tag, s.step): s.value for tag in accumulator.Tags()["scalars"] for s in accumulator.Scalars(tag)}


def main():
    folder = sys.argv[1]
    problems = []
    files, scalars = read_run(folder, problems)
    expected = expected_from_metrics(folder)
    compare("own reader", scalars, expected, problems)
    print(f"own reader: {len(files)} file(s), {len(scalars)} values, metrics.jsonl {len(expected)} values")
    try:
        import tensorboard
    except ImportError:
        print(f"tensorboard: skipped (no tensorboard package in {sys.executable})")
    else:
        got = read_with_tensorboard(folder)
        compare("tensorboard EventAccumulator", got, expected, problems)
        print(f"tensorboard {tensorboard.__version__} EventAccumulator: {len(got)} values")
    for problem in problems:
        print(problem)
    sys.exit(1 if problems or not expected else 0)


if __name__ == "__main__":
    main()
