#!/usr/bin/env python3
"""Turns the GNU Collaborative International Dictionary of English (Debian's dict-gcide) into SFT conversations.

Each row is {"messages": [{"role": "user", "content": "What does the word X mean?"},
                          {"role": "assistant", "content": <X's first definition>}]}
for headwords of 3 to 14 letters (lower-case but the first) whose own entry (the first of the word's entries that yields one) has a definition of 12 to 200 characters: the
first numbered sense (or the text after the part of speech), with cross-reference braces, sense labels such as
"(Zool.)" and the [1913 Webster] source notes removed, cut at its first sentence. One row per headword, in a seeded
order. Standard library only.

Usage: python3 scripts/gcide_to_sft.py --output runs/data/gcide-sft.jsonl [--rows N] [--seed S]
       [--dictionary /usr/share/dictd/gcide]   (reads DICTIONARY.index and DICTIONARY.dict.dz)
"""
import argparse
import gzip
import json
import random
import re

BASE64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
HEADWORD = re.compile(r"^[A-Za-z][a-z]{2,13}$")
SENSE = re.compile(r"\n\s+1\.\s+(.*?)(?=\n\s+2\.|\n\s*\n|$)", re.S)
POS = re.compile(r"^[^\n]*?,\s*(?:n|v|a|adj|adv|v\. t|v\. i)\.\s*(?:\[[^\]]*\]\s*)?(.*?)(?=\n\s*\n|$)", re.S)


def offset(text):
    value = 0
    for c in text:
        value = value * 64 + BASE64.index(c)
    return value


def definition(entry):
    found = SENSE.search(entry) or POS.search(entry)
    if not found:
        return None
    text = found.group(1)
    text = re.sub(r"\[[^\]]*\]", " ", text)                # [1913 Webster], etymologies
    text = re.sub(r"\((?:[A-Z][a-z]*\.?\s*)+\)", " ", text)  # (Zool.), (Bot.)
    text = text.replace("{", "").replace("}", "").replace("\\", "")
    text = re.sub(r"\s+", " ", text).strip(" ;,:")
    text = re.split(r"(?<=[a-z)])[.;] ", text)[0].rstrip(".; ") + "."
    if not (12 <= len(text) <= 200) or "`" in text or not text[0].isalpha():
        return None
    return text[0].upper() + text[1:]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", required=True)
    parser.add_argument("--rows", type=int, default=0, help="at most this many rows (0: all)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--dictionary", default="/usr/share/dictd/gcide")
    args = parser.parse_args()
    data = gzip.open(args.dictionary + ".dict.dz").read()
    seen, rows = set(), []
    with open(args.dictionary + ".index", encoding="utf-8") as index:
        for line in index:
            word, start, length = line.rstrip("\n").split("\t")
            if not HEADWORD.match(word):
                continue
            word = word.lower()
            if word in seen:
                continue
            entry = data[offset(start):offset(start) + offset(length)].decode("utf-8", "replace")
            if not entry.lower().startswith(word + " "):  # an entry of a phrase that holds the word
                continue
            meaning = definition(entry)
            if meaning:
                seen.add(word)
                rows.append({"messages": [{"role": "user", "content": f"What does the word {word} mean?"},
                                          {"role": "assistant", "content": meaning}]})
    random.Random(args.seed).shuffle(rows)
    if args.rows > 0:
        rows = rows[:args.rows]
    with open(args.output, "w", encoding="utf-8") as out:
        for row in rows:
            out.write(json.dumps(row, ensure_ascii=False) + "\n")
    print(f"gcide_to_sft: {len(rows)} conversations in {args.output}")


if __name__ == "__main__":
    main()
