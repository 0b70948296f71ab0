// Probes every Unicode scalar value through Hugging Face tokenizers' BertNormalizer steps and BertPreTokenizer,
// and writes what it observed as C++ range tables (src/tokenize/unicode_tables.cpp) plus a per-code-point
// sweep golden (unicode_sweep.json) that tests/tokenize/unicode_test.cpp checks the C++ normalizer against.
//
// Why not utf8proc: tokenizers classifies with the `unicode_categories` crate and decomposes with
// `unicode-normalization-alignments`, both frozen at Unicode ~9, while lowercasing uses Rust std (Unicode 16+).
// utf8proc 2.8 (Unicode 15) disagrees with that mix on ~700 code points, so the tables come from the reference.
//
// Usage: node gen_unicode_tables.js <repo root>
'use strict';
const fs = require('fs');
const path = require('path');
const { tk, VARIANTS } = require('./reference')(require('tokenizers'));

const repo = process.argv[2] || path.resolve(__dirname, '../../..');
const MAX_CP = 0x10ffff;
const isSurrogate = (cp) => cp >= 0xd800 && cp <= 0xdfff;
const chr = (cp) => String.fromCodePoint(cp);
const cps = (s) => Array.from(s, (c) => c.codePointAt(0));

function assert(cond, message) {
  if (!cond) throw new Error('assertion failed: ' + message);
}

// One BertNormalizer per single step, all others off.
function stepNormalizer(options) {
  const all = { cleanText: false, handleChineseChars: false, stripAccents: false, lowercase: false };
  return tk.bertNormalizer(Object.assign(all, options));
}

// Canonical combining classes of marks that every Unicode version since 3.0 has (UnicodeData.txt), used to
// name the classes the reference's NFD sorts by. The probe below checks each against the reference.
const CCC_REPRESENTATIVES = [
  [1, 0x0334], [7, 0x093c], [8, 0x3099], [9, 0x094d], [10, 0x05b0], [11, 0x05b1], [12, 0x05b2], [13, 0x05b3],
  [14, 0x05b4], [15, 0x05b5], [16, 0x05b6], [17, 0x05b7], [18, 0x05b8], [19, 0x05b9], [20, 0x05bb], [21, 0x05bc],
  [22, 0x05bd], [23, 0x05bf], [24, 0x05c1], [25, 0x05c2], [26, 0xfb1e], [27, 0x064b], [28, 0x064c], [29, 0x064d],
  [30, 0x0618], [31, 0x0619], [32, 0x061a], [33, 0x0651], [34, 0x0652], [35, 0x0670], [36, 0x0711], [84, 0x0c55],
  [91, 0x0c56], [103, 0x0e38], [107, 0x0e48], [118, 0x0eb8], [122, 0x0ec8], [129, 0x0f71], [130, 0x0f72],
  [132, 0x0f74], [202, 0x0321], [214, 0x1dce], [216, 0x031b], [218, 0x302a], [220, 0x0316], [222, 0x059a],
  [224, 0x302e], [226, 0x1d16d], [228, 0x05ae], [230, 0x0300], [232, 0x0315], [233, 0x035c], [234, 0x035d],
  [240, 0x0345],
];

function probeAll() {
  const clean = stepNormalizer({ cleanText: true }), chinese = stepNormalizer({ handleChineseChars: true });
  const strip = stepNormalizer({ stripAccents: true }), lower = stepNormalizer({ lowercase: true });
  const nfd = tk.nfdNormalizer(), pre = tk.bertPreTokenizer();
  const probes = new Map();
  for (let cp = 0; cp <= MAX_CP; cp++) {
    if (isSurrogate(cp)) continue;
    const c = chr(cp);
    const pieces = pre.preTokenizeString('a' + c + 'a').length;
    assert(pieces >= 1 && pieces <= 3, `pre-tokenizer pieces for U+${cp.toString(16)}`);
    probes.set(cp, {
      clean: clean.normalizeString(c), chinese: chinese.normalizeString(c), strip: strip.normalizeString(c),
      lower: lower.normalizeString(c), nfd: nfd.normalizeString(c), split: ['', 'keep', 'space', 'punct'][pieces],
      // NFD reorders a non-starter before U+0301 (ccc 230) when its class is lower, after U+0334 (ccc 1) when higher.
      nonstarter: nfd.normalizeString('\u0301' + c).startsWith(c) || nfd.normalizeString(c + '\u0334').startsWith('\u0334'),
    });
  }
  return { probes, nfd };
}

// Sorted code points → [[first, last], ...].
function toRanges(list) {
  const ranges = [];
  for (const cp of list) {
    const last = ranges[ranges.length - 1];
    if (last && last[1] + 1 === cp) last[1] = cp;
    else ranges.push([cp, cp]);
  }
  return ranges;
}

function select(probes, predicate) {
  const out = [];
  for (const [cp, p] of probes) if (predicate(p, cp)) out.push(cp);
  return out;
}

const HANGUL_FIRST = 0xac00, HANGUL_LAST = 0xd7a3;
function hangulDecomposition(cp) {
  const s = cp - HANGUL_FIRST;
  const out = [0x1100 + Math.floor(s / 588), 0x1161 + Math.floor((s % 588) / 28)];
  if (s % 28) out.push(0x11a7 + (s % 28));
  return out;
}

function combiningClasses(probes, nfd) {
  const nonstarters = select(probes, (p, cp) => p.nonstarter && p.nfd === chr(cp));
  const known = new Set(nonstarters);
  const reps = CCC_REPRESENTATIVES.filter(([, cp]) => known.has(cp));
  const sameClass = (a, b) => nfd.normalizeString(chr(a) + chr(b)) === chr(a) + chr(b) &&
    nfd.normalizeString(chr(b) + chr(a)) === chr(b) + chr(a);
  for (let i = 1; i < reps.length; i++) {
    const [lo, hi] = [chr(reps[i - 1][1]), chr(reps[i][1])];
    assert(nfd.normalizeString(hi + lo) === lo + hi, `class order ${reps[i - 1][0]} < ${reps[i][0]}`);
  }
  return nonstarters.map((cp) => {
    const rep = reps.find(([, r]) => sameClass(cp, r));
    assert(rep, `no combining class representative matches U+${cp.toString(16)}`);
    return [cp, rep[0]];
  });
}

function deriveTables(probes, nfd) {
  const drop = select(probes, (p) => p.clean === '');
  const whitespace = select(probes, (p) => p.split === 'space');
  const cleanSpace = select(probes, (p) => p.clean === ' ');
  assert(JSON.stringify(cleanSpace) === JSON.stringify(whitespace.filter((cp) => probes.get(cp).clean !== '')),
    'clean_text maps exactly the non-dropped pre-tokenizer whitespace to a space');
  const punctuation = select(probes, (p) => p.split === 'punct');
  const chinese = select(probes, (p, cp) => p.chinese === ' ' + chr(cp) + ' ');
  assert(select(probes, (p, cp) => p.chinese !== chr(cp)).length === chinese.length, 'chinese step only pads');
  const mark = select(probes, (p, cp) => p.nfd === chr(cp) && p.strip === '');
  const markSet = new Set(mark);
  const decompositions = [];
  for (const [cp, p] of probes) {
    const stripped = cps(p.nfd).filter((c) => !markSet.has(c)).map(chr).join('');
    assert(stripped === p.strip, `strip_accents = NFD minus marks at U+${cp.toString(16)}`);
    if (p.nfd === chr(cp)) continue;
    if (cp >= HANGUL_FIRST && cp <= HANGUL_LAST) {
      assert(JSON.stringify(cps(p.nfd)) === JSON.stringify(hangulDecomposition(cp)), 'hangul decomposition');
      continue;
    }
    decompositions.push([cp, cps(p.nfd)]);
  }
  const lowercase = [];
  for (const [cp, p] of probes) if (p.lower !== chr(cp)) lowercase.push([cp, cps(p.lower)]);
  return { drop, whitespace, punctuation, chinese, mark, decompositions, lowercase,
    combining: combiningClasses(probes, nfd) };
}

// ---- C++ emitter ----
const hex = (cp) => '0x' + cp.toString(16).toUpperCase().padStart(4, '0');

function wrap(items, indent = '  ', width = 116) {
  const lines = [];
  let line = indent;
  for (const item of items) {
    if (line.length + item.length + 1 > width && line.trim()) { lines.push(line.trimEnd()); line = indent; }
    line += item + ' ';
  }
  if (line.trim()) lines.push(line.trimEnd());
  return lines.join('\n');
}

function emitRanges(name, list) {
  const items = toRanges(list).map(([a, b]) => `{${hex(a)}, ${hex(b)}},`);
  return `constexpr CodepointRange ${name}[] = {\n${wrap(items)}\n};\n`;
}

function emitMappings(name, mappings, pool) {
  const items = mappings.map(([cp, out]) => {
    const offset = pool.length;
    pool.push(...out);
    return `{${hex(cp)}, ${offset}, ${out.length}},`;
  });
  return `constexpr CodepointMapping ${name}[] = {\n${wrap(items)}\n};\n`;
}

function emitCombining(combining) {
  const ranges = [];
  for (const [cp, ccc] of combining) {
    const last = ranges[ranges.length - 1];
    if (last && last[1] + 1 === cp && last[2] === ccc) last[1] = cp;
    else ranges.push([cp, cp, ccc]);
  }
  const items = ranges.map(([a, b, c]) => `{${hex(a)}, ${hex(b)}, ${c}},`);
  return `constexpr CombiningClassRange kCombiningData[] = {\n${wrap(items)}\n};\n`;
}

function emitCpp(tables, version) {
  const pool = [];
  const body = [
    emitRanges('kDropData', tables.drop), emitRanges('kWhitespaceData', tables.whitespace),
    emitRanges('kPunctuationData', tables.punctuation), emitRanges('kChineseData', tables.chinese),
    emitRanges('kNonspacingMarkData', tables.mark), emitCombining(tables.combining),
    emitMappings('kDecompositionData', tables.decompositions, pool),
    emitMappings('kLowercaseData', tables.lowercase, pool),
  ];
  assert(pool.length < 65536, 'mapping pool fits uint16 offsets');
  const poolText = `constexpr char32_t kMappingPool[] = {\n${wrap(pool.map((cp) => hex(cp) + ','))}\n};\n`;
  const names = [['kDrop', 'kDropData', 'CodepointRange'], ['kWhitespace', 'kWhitespaceData', 'CodepointRange'],
    ['kPunctuation', 'kPunctuationData', 'CodepointRange'], ['kChinese', 'kChineseData', 'CodepointRange'],
    ['kNonspacingMark', 'kNonspacingMarkData', 'CodepointRange'],
    ['kCombiningClass', 'kCombiningData', 'CombiningClassRange'],
    ['kDecomposition', 'kDecompositionData', 'CodepointMapping'], ['kLowercase', 'kLowercaseData', 'CodepointMapping']];
  const exported = names.map(([pub, data, type]) => `const Span<${type}> ${pub}{${data}, std::size(${data})};`);
  return `// Unicode tables observed from Hugging Face tokenizers ${version} (BertNormalizer, BertPreTokenizer, NFD).
// GENERATED by tests/tokenize/golden/gen_unicode_tables.js -- do not edit; see tests/tokenize/golden/README.md.
#include "tokenize/unicode_tables.hpp"

#include <iterator>

namespace hpctrain::tokenize::detail {
namespace {

${body.join('\n')}
${poolText}
}  // namespace

${exported.join('\n')}
const char32_t* const kMappingPoolData = kMappingPool;

}  // namespace hpctrain::tokenize::detail
`;
}

// ---- sweep golden: per block of code points, a hash of what each normalizer / the pre-tokenizer produced ----
const crypto = require('crypto');
const BLOCK = 4096;
const blockHash = (parts) => crypto.createHash('sha256').update(parts.join('')).digest('hex').slice(0, 16);

function sweepHashes(outputOf) {
  const hashes = [];
  for (let first = 0; first <= MAX_CP; first += BLOCK) {
    const parts = [];
    for (let cp = first; cp < first + BLOCK; cp++) if (!isSurrogate(cp)) parts.push(outputOf(cp) + '\u0000');
    hashes.push(blockHash(parts));
  }
  return hashes;
}

function emitSweep(probes, version) {
  const normalizers = {};
  for (let mask = 0; mask < 16; mask++) {
    const options = { cleanText: !!(mask & 1), handleChineseChars: !!(mask & 2), stripAccents: !!(mask & 4),
      lowercase: !!(mask & 8) };
    const normalizer = tk.bertNormalizer(options);
    const name = Object.entries(options).filter(([, on]) => on).map(([k]) => k).join('+') || 'none';
    normalizers[name] = { options, blocks: sweepHashes((cp) => normalizer.normalizeString(chr(cp))) };
  }
  const split = sweepHashes((cp) => probes.get(cp).split);
  return { tokenizers_version: version, block_size: BLOCK,
    format: 'per block of block_size code points (surrogates skipped): first 16 hex digits of sha256 over ' +
      'output + "\\u0000" per code point; pre_tokenizer output is "keep", "space" or "punct" for "a" + c + "a"',
    normalizers, pre_tokenizer: split };
}

function main() {
  const version = require('tokenizers/package.json').version;
  const { probes, nfd } = probeAll();
  const tables = deriveTables(probes, nfd);
  fs.writeFileSync(path.join(repo, 'src/tokenize/unicode_tables.cpp'), emitCpp(tables, version));
  fs.writeFileSync(path.join(__dirname, 'unicode_sweep.json'), JSON.stringify(emitSweep(probes, version), null, 1) + '\n');
  const survivors = tables.combining.filter(([cp]) => !tables.mark.includes(cp));
  console.log(`tables: ${tables.drop.length} dropped, ${tables.punctuation.length} punctuation, ` +
    `${tables.mark.length} marks, ${tables.decompositions.length} decompositions, ${tables.lowercase.length} lowercase, ` +
    `${tables.combining.length} non-starters (${survivors.length} kept by strip_accents: ` +
    `${survivors.map(([cp, c]) => hex(cp) + ':' + c).join(' ')})`);
}

main();
