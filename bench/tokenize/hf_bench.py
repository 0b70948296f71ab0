"""Hugging Face tokenizers side of the tokenizer benchmark (the Rust library behind BertTokenizerFast, through its
Python binding): a Tokenizer built as transformers' BertConverter builds bert-base-uncased's, max_length 128
truncation, no padding, encode_batch over the corpus on --threads rayon threads. Prints one JSON line (MB/s per
wall-clock and per CPU second, best of --repeat runs); writes "<count> <h1> <h2>" per entry (checksums of the ids,
as bench_tokenize.cpp does) to --ids-out.
Usage: python3 hf_bench.py --corpus FILE --vocab VOCAB_TXT --threads N [--repeat 3] [--max-length 128] [--ids-out FILE]
"""
import argparse
import json
import os
import resource
import time

BATCH = 4096  # entries per encode_batch call
SPECIAL_TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--corpus", required=True)
    p.add_argument("--vocab", required=True)
    p.add_argument("--threads", type=int, required=True)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--max-length", type=int, default=128)
    p.add_argument("--ids-out")
    return p.parse_args()


def read_vocab(path):
    # transformers' load_vocab: one token per line, id = line number.
    with open(path, encoding="utf-8") as f:
        return {line.rstrip("\n"): i for i, line in enumerate(f)}


def bert_uncased(tk, vocab, max_length):
    tokenizer = tk.Tokenizer(tk.models.WordPiece(vocab, unk_token="[UNK]", max_input_chars_per_word=100))
    tokenizer.normalizer = tk.normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True,
                                                         strip_accents=None, lowercase=True)
    tokenizer.pre_tokenizer = tk.pre_tokenizers.BertPreTokenizer()
    cls, sep = vocab["[CLS]"], vocab["[SEP]"]
    tokenizer.post_processor = tk.processors.TemplateProcessing(
        single="[CLS]:0 $A:0 [SEP]:0", pair="[CLS]:0 $A:0 [SEP]:0 $B:1 [SEP]:1",
        special_tokens=[("[CLS]", cls), ("[SEP]", sep)])
    tokenizer.decoder = tk.decoders.WordPiece(prefix="##")
    tokenizer.add_special_tokens([t for t in SPECIAL_TOKENS if t in vocab])
    tokenizer.enable_truncation(max_length, strategy="longest_first", stride=0)
    return tokenizer


def checksum(ids):
    """count, FNV-1a over 32-bit ids, and a multiplicative hash (both mod 2^32), as bench_tokenize.cpp."""
    h1, h2 = 0x811C9DC5, 0
    for i in ids:
        h1 = ((h1 ^ i) * 16777619) & 0xFFFFFFFF
        h2 = (h2 * 31 + i) & 0xFFFFFFFF
    return f"{len(ids)} {h1:x} {h2:x}"


def encode_all(tokenizer, entries):
    out = []
    for i in range(0, len(entries), BATCH):
        out.extend(tokenizer.encode_batch(entries[i:i + BATCH]))
    return out


def cpu_seconds():
    usage = resource.getrusage(resource.RUSAGE_SELF)  # all threads of the process
    return usage.ru_utime + usage.ru_stime


def main():
    a = parse_args()
    # tokenizers runs encode_batch on rayon's global pool, sized from RAYON_NUM_THREADS when first used.
    os.environ["RAYON_NUM_THREADS"] = str(a.threads)
    os.environ["TOKENIZERS_PARALLELISM"] = "true"
    import tokenizers as tk
    with open(a.corpus, "rb") as f:
        data = f.read()
    entries = data.decode("utf-8").split("\0")
    tokenizer = bert_uncased(tk, read_vocab(a.vocab), a.max_length)
    encode_all(tokenizer, entries[:2000])  # warm-up
    best = best_cpu = float("inf")
    for _ in range(a.repeat):
        start, cpu_start = time.perf_counter(), cpu_seconds()
        encodings = encode_all(tokenizer, entries)
        best = min(best, time.perf_counter() - start)
        best_cpu = min(best_cpu, cpu_seconds() - cpu_start)
    if a.ids_out:
        with open(a.ids_out, "w") as f:
            f.write("\n".join(checksum(e.ids) for e in encodings) + "\n")
    mb = len(data) / 1e6
    print(json.dumps({"impl": f"HF tokenizers {tk.__version__} (python)", "threads": a.threads, "seconds": best,
                      "cpu_seconds": best_cpu, "bytes": len(data), "entries": len(entries),
                      "mb_per_s": mb / best, "mb_per_cpu_s": mb / best_cpu}))


if __name__ == "__main__":
    main()
