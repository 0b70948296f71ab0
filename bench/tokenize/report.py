"""Prints the tokenizer benchmark's table from the JSON lines bench_tokenize and hf_bench.py wrote.
Usage: python3 report.py RESULTS.jsonl AGREE(yes|no)
"""
import json
import sys

rows = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
first = rows[0]
print(f"corpus: {first['bytes'] / 1e6:.1f} MB, {first['entries']} texts (fortunes), bert-base-uncased, max_length 128")
print("| implementation | threads | MB/s | MB per CPU-second | hpctrain / HF (MB/s) | hpctrain / HF (CPU) |")
print("|---|---:|---:|---:|---:|---:|")
for row in rows:
    hf = next((r for r in rows if r["impl"] != "hpctrain" and r["threads"] == row["threads"]), None)
    ratio = lambda key: f"{row[key] / hf[key]:.1f}x" if row["impl"] == "hpctrain" and hf else ""
    print(f"| {row['impl']} | {row['threads']} | {row['mb_per_s']:.1f} | {row['mb_per_cpu_s']:.1f} | "
          f"{ratio('mb_per_s')} | {ratio('mb_per_cpu_s')} |")
print(f"ids agree on every text (all runs): {sys.argv[2]}")
