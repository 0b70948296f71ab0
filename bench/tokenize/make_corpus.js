// Writes the tokenizer benchmark corpus: every fortune (/usr/share/games/fortunes, entries split on "%" lines),
// repeated until the file holds about <megabytes> MB of UTF-8 text; entries are separated by a NUL byte.
// Usage: node make_corpus.js <out file> [megabytes=24]
'use strict';
const fs = require('fs');
const path = require('path');

const FORTUNES = '/usr/share/games/fortunes';

function fortunes() {
  const entries = [];
  for (const name of fs.readdirSync(FORTUNES).sort()) {
    if (name.includes('.')) continue;  // .dat indexes, .u8 links
    const text = fs.readFileSync(path.join(FORTUNES, name), 'utf8');
    for (const entry of text.split(/^%$/m)) if (entry.trim()) entries.push(entry.replace(/^\n/, '').replace(/\n$/, ''));
  }
  if (entries.length === 0) throw new Error(`no fortunes in ${FORTUNES}; install them with: apt-get install fortunes`);
  return entries;
}

function main() {
  const [out, megabytes = '24'] = process.argv.slice(2);
  if (!out) throw new Error('usage: node make_corpus.js <out file> [megabytes]');
  const target = Number(megabytes) * 1e6;
  const entries = fortunes().map((e) => Buffer.from(e, 'utf8'));
  const parts = [];
  let bytes = 0;
  while (bytes < target) {
    for (const e of entries) {
      parts.push(e, Buffer.from([0]));
      bytes += e.length + 1;
      if (bytes >= target) break;
    }
  }
  parts.pop();  // no separator after the last entry
  fs.writeFileSync(out, Buffer.concat(parts));
  console.error(`corpus: ${out}: ${(bytes / 1e6).toFixed(1)} MB, ${parts.length / 2 + 0.5} entries (${entries.length} distinct)`);
}

main();
