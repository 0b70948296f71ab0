"""Writes the tokenizer benchmark corpus: every fortune (/usr/share/games/fortunes, entries split on "%" lines),
repeated until the file holds about <megabytes> MB of UTF-8 text; entries are separated by a NUL byte.
Usage: python3 make_corpus.py OUT_FILE [MEGABYTES=24]
"""
import os
import re
import sys

FORTUNES = "/usr/share/games/fortunes"


def fortunes():
    entries = []
    for name in sorted(os.listdir(FORTUNES)):
        if "." in name:  # .dat indexes, .u8 links
            continue
        with open(os.path.join(FORTUNES, name), encoding="utf-8") as f:
            text = f.read()
        for entry in re.split(r"^%$", text, flags=re.M):
            if entry.strip():
                entries.append(entry.removeprefix("\n").removesuffix("\n"))
    if not entries:
        sys.exit(f"no fortunes in {FORTUNES}; install them with: apt-get install fortunes")
    return entries


def main():
    if len(sys.argv) < 2:
        sys.exit("usage: python3 make_corpus.py OUT_FILE [MEGABYTES]")
    out, target = sys.argv[1], float(sys.argv[2] if len(sys.argv) > 2 else 24) * 1e6
    entries = [e.encode("utf-8") for e in fortunes()]
    parts, size = [], 0
    while size < target:
        for e in entries:
            parts.append(e)
            size += len(e) + 1
            if size >= target:
                break
    with open(out, "wb") as f:
        f.write(b"\0".join(parts))
    print(f"corpus: {out}: {size / 1e6:.1f} MB, {len(parts)} entries ({len(entries)} distinct)", file=sys.stderr)


if __name__ == "__main__":
    main()
