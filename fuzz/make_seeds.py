#!/usr/bin/env python3
"""Writes the seed corpus in fuzz/corpus/<target>/ (except fuzz_hdf5_dataset, see make_hdf5_seeds.cpp): valid
examples like those in tests/ plus a few hostile ones. Run from the repository root; it only adds or rewrites
seed-*.  Crash reproducers found by fuzzing are kept beside them as crash-* (docs/fuzzing.md)."""
import gzip
import json
import pathlib
import shutil
import struct

ROOT = pathlib.Path(__file__).resolve().parent.parent
CORPUS = ROOT / "fuzz" / "corpus"


def put(target, name, data):
    folder = CORPUS / target
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"seed-{name}").write_bytes(data if isinstance(data, bytes) else data.encode())


def safetensors(header, data=b"", pad=True):
    text = json.dumps(header, separators=(",", ":")).encode()
    if pad:
        text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + data


def safetensors_seeds():
    t = "fuzz_safetensors"
    put(t, "empty-header", safetensors({}))
    put(t, "metadata", safetensors({"__metadata__": {"format": "pt"}}))
    put(t, "two-tensors", safetensors({"__metadata__": {"format": "pt"},
                                       "a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                                       "b": {"dtype": "I64", "shape": [1, 1], "data_offsets": [8, 16]}}, bytes(16)))
    put(t, "dtypes", safetensors({"h": {"dtype": "F16", "shape": [2], "data_offsets": [0, 4]},
                                  "g": {"dtype": "BF16", "shape": [], "data_offsets": [4, 6]},
                                  "u": {"dtype": "U8", "shape": [2], "data_offsets": [6, 8]},
                                  "z": {"dtype": "F64", "shape": [0, 3], "data_offsets": [8, 8]}}, bytes(8)))
    put(t, "overlap", safetensors({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                                   "b": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}}, bytes(8)))
    put(t, "gap", safetensors({"a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}}, bytes(8)))
    put(t, "huge-shape", safetensors({"a": {"dtype": "F32", "shape": [4294967296, 4294967296, 2],
                                            "data_offsets": [0, 0]}}))
    put(t, "duplicate", b'\x20\0\0\0\0\0\0\0{"a":{},"a":{}}                 ')
    put(t, "length-past-end", struct.pack("<Q", 1 << 40) + b"{}")
    put(t, "truncated", safetensors({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}, bytes(5)))
    shutil.copy(ROOT / "tests/io/golden/reference.safetensors", CORPUS / t / "seed-reference.safetensors")


def config_seeds():
    t = "fuzz_hf_config"
    for name in ["tiny-bert-f32", "tiny-distilbert-f32", "tiny-distilbert-bf16"]:
        put(t, name, (ROOT / "tests/models/golden" / name / "config.json").read_bytes())
    put(t, "cnn", json.dumps({"model_type": "hpctrain-cnn", "in_channels": 3, "image_size": 32,
                              "conv_channels": [32, 64], "hidden": [128], "dropout": 0.1,
                              "id2label": {"0": "a", "1": "b", "2": "c"}}))
    put(t, "mlp", json.dumps({"model_type": "hpctrain-mlp", "in_channels": 1, "image_size": 28,
                              "hidden": [256, 128], "num_labels": 10}))
    put(t, "generic", json.dumps({"model_type": "roberta", "num_labels": 3, "problem_type": "regression",
                                  "torch_dtype": "float16", "label2id": {"x": 0}}))
    put(t, "hostile-types", json.dumps({"model_type": "distilbert", "dim": "768", "n_heads": 7, "n_layers": -1,
                                        "id2label": {"01": "a", "1": 2}, "dropout": 2.5}))
    put(t, "hostile-sizes", json.dumps({"model_type": "bert", "hidden_size": 9223372036854775807,
                                        "num_attention_heads": 0, "vocab_size": 1e300,
                                        "num_labels": 2147483648, "classifier_dropout": None}))
    put(t, "not-object", "[1, 2, 3]")


def text_seeds():
    t = "fuzz_text_records"
    csv = "id,text,label\n1,\"hello, \"\"world\"\"\",pos\n2,\"\",neg\n3,plain,\"x\"\n"
    put(t, "csv", b"\x00" + csv.encode())
    put(t, "csv-newlines", b"\x04" + b"text,label\n\"first\nsecond\",a\n\"x\r\ny\r\nz\",b\nlast,c\n")
    put(t, "csv-bom-crlf", b"\x08" + b"\xEF\xBB\xBFtext,label\r\ncaf\xC3\xA9,1\r\n\r\nx,2\r\n")
    put(t, "csv-hostile", b"\x0c" + b"text,label\n\"open,1\nbad\"quote,2\n\"a\"b,3\nx,y,z\nlast,4\n")
    put(t, "tsv", b"\x01" + b"text\tlabel\n\"quoted\ttab\"\t1\nplain\t2\n")
    put(t, "jsonl", b"\x02" + b'{"text": "hi \\u00e9 \\ud83d\\ude00", "label": 1}\n{"text": "x", "label": true}\n'
                               b'{"label": null, "text": "y"}\n\n{"text": 1.50e3, "label": -0}\r\n')
    put(t, "jsonl-hostile", b"\x06" + b'{"text": [1], "label": 1}\n{"text": "a", "text": "b", "label": 2}\n'
                                      b'{"text": "\\ud800", "label": 3}\n{"text": "\xff\xfe", "label": 4}\nnot json\n'
                                      b'{"text": "unterminated\n{"text": 1e999, "label": 5}\n')
    put(t, "jsonl-gzip", b"\x03" + gzip.compress(b'{"text": "zipped", "label": "a"}\n' * 3, mtime=0))
    put(t, "csv-gzip", b"\x00" + gzip.compress(b"text,label\nzipped,a\n", mtime=0))


def tokenizer_seeds():
    t = "fuzz_tokenizer"
    put(t, "plain", b"\x00\xff\x00Hello, world! This is a test of WordPiece tokenization.")
    put(t, "pair", b"\x04\x10\x80The first sentence.The second, longer sentence here.")
    put(t, "accents", b"\x01\x40\x00Caf\xc3\xa9 na\xc3\xafve \xc3\x85ngstr\xc3\xb6m r\xc3\xa9sum\xc3\xa9")
    put(t, "cjk", b"\x02\xff\x00\xe4\xbd\xa0\xe5\xa5\xbd\xe4\xb8\x96\xe7\x95\x8c \xe3\x81\x93\xe3\x82\x93 \xed\x95\x9c")
    put(t, "specials", b"\x03\x20\x00[CLS] hello[SEP]x [MASK][unused0] [UNK]hello unbelievably")
    put(t, "invalid-utf8", b"\x05\xff\x60ab\xff\xc3(\xe2\x82 \xf0\x9f\x98 \xed\xa0\x80 \xc0\xaf end")
    put(t, "controls", b"\x07\x05\x40\x00\x01\t\n\r\x7f\xc2\xa0\xe2\x80\x8b\xef\xbb\xbf x")
    cases = (ROOT / "tests/tokenize/golden/cases.jsonl").read_text(encoding="utf-8").splitlines()
    for i, line in enumerate(cases[:: max(1, len(cases) // 12)][:12]):
        text = json.loads(line)["text"].encode("utf-8", "surrogatepass")
        put(t, f"golden-{i}", bytes([i % 4, 0xff, 0]) + text[:2000])


def chat_template_seeds():
    t = "fuzz_chat_template"
    templates = ROOT / "tests/chat/templates"
    for i, name in enumerate(["llama3.jinja", "qwen2_5_training.jinja", "gemma.jinja", "phi3_training.jinja",
                              "cohere.jinja", "llama3_2.jinja", "qwen3.jinja", "deepseekv3_training.jinja"]):
        put(t, name.replace(".jinja", ""), bytes([i * 5 % 16]) + (templates / name).read_bytes())
    snippets = json.loads((ROOT / "tests/chat/snippets.json").read_text(encoding="utf-8"))["cases"]
    for i, snippet in enumerate(snippets[::4]):
        put(t, f"snippet-{snippet['name']}", bytes([i % 16]) + snippet["template"].encode())
    put(t, "recursion", b"\x00{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}")
    put(t, "doubling", b"\x00{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}")
    put(t, "invalid-utf8", b"\x01{{ 'a\xff' }}\xc3(")


if __name__ == "__main__":
    safetensors_seeds()
    config_seeds()
    text_seeds()
    tokenizer_seeds()
    chat_template_seeds()
