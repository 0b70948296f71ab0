#!/usr/bin/env python3
"""Builds the default text-classification corpus from Debian's `fortunes` package.

Each fortune file in /usr/share/games/fortunes/<category> holds entries separated by lines that
contain only '%'. The category is the label. By default we take six categories with distinct topics and
500-1300 entries each: computers, definitions, people, politics, science, songs-poems; `--categories all`
takes every fortune file (each one with a `.dat` index beside it, sorted by name: the language-model corpus of
scripts/lm-example.sh).
Output: JSONL rows {"text": ..., "label": category}, in file order (prep shuffles them).
Standard library only.
"""
import argparse
import json
import os
import sys

CATEGORIES = ["computers", "definitions", "people", "politics", "science", "songs-poems"]
FORTUNE_DIR = "/usr/share/games/fortunes"


def read_entries(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        entry = []
        for line in f:
            if line.rstrip("\r\n") == "%":
                text = "".join(entry).strip()
                if text:
                    yield text
                entry = []
            else:
                entry.append(line)
        text = "".join(entry).strip()
        if text:
            yield text


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", required=True)
    parser.add_argument("--fortune-dir", default=FORTUNE_DIR)
    parser.add_argument("--categories", default=",".join(CATEGORIES),
                        help="comma-separated fortune files, or 'all' (default: the six classification categories)")
    args = parser.parse_args()
    categories = args.categories.split(",")
    if args.categories == "all":
        categories = sorted(name[:-len(".dat")] for name in os.listdir(args.fortune_dir) if name.endswith(".dat")
                            and os.path.isfile(os.path.join(args.fortune_dir, name[:-len(".dat")])))
    rows = 0
    tmp = args.output + ".tmp"
    with open(tmp, "w", encoding="utf-8") as out:
        for category in categories:
            path = os.path.join(args.fortune_dir, category)
            if not os.path.isfile(path):
                sys.exit(f"fortunes_to_jsonl: {path} is missing; install Debian's 'fortunes' package")
            for text in read_entries(path):
                out.write(json.dumps({"text": text, "label": category}, ensure_ascii=False) + "\n")
                rows += 1
    os.replace(tmp, args.output)
    print(f"fortunes_to_jsonl: wrote {rows} rows in {len(categories)} categories to {args.output}")


if __name__ == "__main__":
    main()
