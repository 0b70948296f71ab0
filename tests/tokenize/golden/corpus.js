// Inputs for the goldens: hand-picked tricky strings, fortune-file sentences, seeded random code point fuzz,
// combining-mark orderings and invalid UTF-8 byte strings.
'use strict';
const fs = require('fs');
const path = require('path');

// Deterministic PRNG (mulberry32), so regenerating gives the same corpus.
function rng(seed) {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const TRICKY = [
  // empty and whitespace
  '', ' ', '   ', '\t\n\r ', '\u00a0\u3000\u2009', '\n\n\n', 'tab\there\nnew\r\nline\rcr',
  'nbsp\u00a0here', 'ideographic\u3000space', 'thin\u2009space', 'en\u2002em\u2003fig\u2007', 'line\u2028para\u2029sep',
  '\u1680ogham\u202fnarrow\u205fmath', 'next\u0085line', 'vt\u000bff\u000cfs\u001cus\u001f',
  // accents, case
  'Hello, world!', 'café naïve Ångström Zürich résumé', 'CAFÉ NAÏVE ÅNGSTRÖM ZÜRICH', 'Crème Brûlée à la française',
  'İstanbul İIıi İ̇', 'Straße STRASSE ß ẞ', 'ΟΔΥΣΣΕΥΣ Σίσυφος ὀδυσσεύς σ ς Σ', 'ǅ ǆ Ǆ ǈ Ǳ ŉ ﬁ ﬂ ﬃ ﬅ', 'Ὰ ᾼ ᾳ ῼ',
  'K Å Ω µ', 'Ⅻ ⅻ ①②③ Ⓐ ＡＢＣ ａｂｃ', 'e\u0301 e\u0301\u0327 \u0301 a\u0301 \u0301a \u0300\u0301\u0302',
  'Tiếng Việt có dấu', 'Привет, мир! ЁЖИК ёжик', 'Ελληνικά ΆΈΉΊΌΎΏ', 'Dž dž DŽ', 'ǰ ẖ ẗ ẘ ẙ',
  // CJK, kana, hangul
  '中文字符', '我爱北京天安门。', '日本語のひらがなとカタカナ、漢字まじり', 'ｶﾀｶﾅ ﾊﾝｶｸ', '한국어 텍스트 한글', '한 한',
  '𠀀𠀁 𪜀 𫝀 𫠠 𬺰 丽 豈', '\u{2b81f}\u{2b820}\u{2b91f}\u{2b920}\u{2ceaf}\u{2ceb0}', 'abc中def', '中a文b',
  'Kanji漢字mixed with English', '\u3400\u4dbf\u4dc0\u9fff\ua000\uf900\ufaff\ufb00',
  // emoji
  '😀 👍🏽 👨‍👩‍👧‍👦 🇩🇪🇺🇸 🏳️‍🌈 ❤️ ☺︎', '🥰🫠🪿', 'I ❤ NY', '\u{1f1e9}\u{1f1ea}', 'keycap 1\ufe0f\u20e3',
  // control and format characters
  'a\u0000b', 'bell\u0007ring', 'del\u007fete', 'zero\u200bwidth', 'soft\u00adhyphen', 'bom\ufeffinside', '\ufeffbom',
  'rep\ufffdlacement', 'rtl\u202eoverride\u202c', 'joiner\u200dnon\u200cjoiner', 'word\u2060joiner',
  'private\ue000use\u{f0000}', 'unassigned\u0378\u{e0080}\u{10fffd}', 'tag\u{e0041}\u{e007f}', 'variation\ufe0f\u{e0100}',
  'arabic\u0600\u0605\u061c\u06dd', 'interlinear\ufff9\ufffa\ufffb', 'c1\u0080\u0090\u009f',
  // long words
  'a'.repeat(99), 'a'.repeat(100), 'a'.repeat(101), 'é'.repeat(100), 'é'.repeat(101), 'ñ'.repeat(100),
  'e\u0301'.repeat(60), 'ü'.repeat(150), 'supercalifragilisticexpialidocious'.repeat(3),
  'x' + '\u00ad'.repeat(120) + 'y', 'word ' + 'b'.repeat(100) + ' ' + 'c'.repeat(101) + ' end', '中'.repeat(120),
  '😀'.repeat(101), 'pneumonoultramicroscopicsilicovolcanoconiosis antidisestablishmentarianism',
  // punctuation runs
  '!!!???...', '$100,000.00', 'a--b', '«quotes»', '¿qué?', '¡Hola!', '“smart” ‘quotes’ „low“', 'em—dash en–dash',
  '…', '@user #hashtag', 'C++ & C# | F#', 'e-mail: foo@bar.com', 'http://example.com/path?q=1&r=2#frag',
  "don't won't y'all", '(parens) [brackets] {braces} <angles>', '¡¿‽⁇⁈⁉', '、。〃〈〉《》「」『』【】〔〕',
  '\u037e;\u0387·', '\u2e43\u2e52\u2e5d\u166d\u111c9', '‐‑‒–—―', '_under_score_', '~tilde~ `back` ^caret^',
  // math and symbols
  '∑ ≤ ≥ ∞ ∫ √ π ± × ÷', '2+2=4', '°C ‰ ‱', '§ ¶ † ‡ •', '¢£¤¥ €₹₿', '½ ¼ ¾ ² ³ ¹', '™ © ®',
  // special tokens in the text
  'x[SEP]y', '[CLS] hello [SEP] world [MASK]', '[mask] [Mask] [MASK]', '[UNK][PAD]', '[[SEP]]', '[SE P]',
  '[MASK][MASK]', 'trailing [SEP', '[CLS]', 'ab[PAD]cd[UNK]ef',
  // scripts
  'العربية مرحبا بالعالم', 'שָׁלוֹם עוֹלָם', 'नमस्ते दुनिया क़', 'สวัสดีครับ', 'ཨོཾ་མ་ཎི་པདྨེ་ཧཱུྃ \u0f73\u0f75\u0f81',
  'ქართული', 'Հայերեն', 'ᚠᚢᚦ', '𐌰𐌱𐌲', '𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𝐛𝐨𝐥𝐝', '\u{a7cb}\u{a7cc}\u{a7da}\u{10d50}\u{16ea0} \u1c89',
  '\u{1d165}\u{1d16d}\u{1d16e}\u{1d172}', '\u0890\u0891\u08e2\u{13430}\u{110cd}',
];

function fortuneEntries() {
  const dir = '/usr/share/games/fortunes';
  const entries = [];
  for (const name of fs.readdirSync(dir).sort()) {
    if (name.includes('.')) continue;  // skip .dat indexes and .u8 links
    const text = fs.readFileSync(path.join(dir, name), 'utf8');
    for (const entry of text.split(/\n%\n/)) if (entry.trim()) entries.push(entry.replace(/\n%$/, ''));
  }
  return entries;
}

// About 200 real sentences of 20..400 characters, picked evenly from all fortune files.
function sentences(count = 200) {
  const fit = fortuneEntries().filter((e) => e.length >= 20 && e.length <= 400);
  const step = fit.length / count;
  return Array.from({ length: count }, (_, i) => fit[Math.floor(i * step)]);
}

// Code point pools for the fuzz strings, from many planes and categories.
const POOLS = [
  [0x20, 0x7e], [0x00, 0x1f], [0x80, 0xff], [0x100, 0x24f], [0x300, 0x36f], [0x370, 0x3ff], [0x400, 0x4ff],
  [0x590, 0x6ff], [0x900, 0x97f], [0xe00, 0xe7f], [0x1100, 0x11ff], [0x1ab0, 0x1aff], [0x1dc0, 0x1dff],
  [0x2000, 0x206f], [0x20a0, 0x22ff], [0x2e00, 0x2e7f], [0x3000, 0x30ff], [0x3400, 0x4dbf], [0x4e00, 0x9fff],
  [0xa700, 0xa7ff], [0xac00, 0xd7a3], [0xe000, 0xf8ff], [0xf900, 0xfaff], [0xfb00, 0xfdff], [0xfe00, 0xfe6f],
  [0xff00, 0xffff], [0x10000, 0x1ffff], [0x1f300, 0x1faff], [0x1d100, 0x1d1ff], [0x1e000, 0x1e9ff],
  [0x20000, 0x2ffff], [0x2b700, 0x2b9ff], [0x30000, 0x3ffff], [0x40000, 0xdffff], [0xe0000, 0xe01ef],
  [0xf0000, 0x10ffff],
];

function fuzzStrings(count = 150, seed = 12345) {
  const random = rng(seed);
  const pick = (n) => Math.floor(random() * n);
  const out = [];
  for (let i = 0; i < count; i++) {
    const length = 1 + pick(40);
    let s = '';
    for (let k = 0; k < length; k++) {
      if (random() < 0.15) { s += ' '; continue; }
      const [lo, hi] = POOLS[pick(POOLS.length)];
      let cp = lo + pick(hi - lo + 1);
      if (cp >= 0xd800 && cp <= 0xdfff) cp = 0xfffd;
      s += String.fromCodePoint(cp);
    }
    out.push(s);
  }
  return out;
}

// NFD sorts runs of non-starters by combining class; strings with marks out of canonical order, including the
// non-starters that strip_accents keeps (Mc / newer marks).
const NONSTARTERS = [0x0301, 0x0315, 0x0316, 0x0327, 0x0334, 0x05b0, 0x093c, 0x094d, 0x0e38, 0x0f71, 0x0f72,
  0x08d4, 0x1b44, 0x302e, 0x302f, 0x1d165, 0x1d16d, 0x1d16e, 0x1e000, 0x1e944, 0x1e94a, 0x11446, 0x0345, 0x1dfb];

function combiningStrings(seed = 777) {
  const random = rng(seed);
  const out = [];
  for (let i = 0; i < 60; i++) {
    let s = 'a';
    const n = 2 + Math.floor(random() * 4);
    for (let k = 0; k < n; k++) s += String.fromCodePoint(NONSTARTERS[Math.floor(random() * NONSTARTERS.length)]);
    out.push(s + 'b' + String.fromCodePoint(0x1d16d, 0x1d165) + ' \u00e9\u0315\u0300 x');
  }
  return out;
}

// Byte strings (hex) that are not valid UTF-8.
const INVALID_UTF8_HEX = [
  'ff', 'fe', 'c0af', 'c1bf', 'e080af', 'f08080af', 'eda080', 'edbfbf', 'eda080edb080', 'f4908080', 'f5808080',
  'f8888080', 'c3', 'e282', 'f09f98', '80', 'bf', '8080bf', 'c341', 'e228a1', 'e28228', 'f0288cbc', 'f0902828',
  '68656c6c6fff776f726c64', '636166c3a9ff', '616263ff646566', 'ff5b5345505d', '5b534550ff5d', 'c3a980c3',
  '20e29c2080e29c93', 'f09f9880f09f98', 'e0a080', 'efbfbd', 'c2a0ff', 'e4b8ade6', 'e4b8ade696872020',
];

function longText(bytes = 40000) {
  let s = '';
  for (const e of fortuneEntries()) {
    if (s.length >= bytes) break;
    s += e + '\n';
  }
  // Non-ASCII and combining marks right around the 16 KiB chunk boundaries.
  return s.slice(0, 16380) + 'ééé\u0301\u0315 中文 İ ' + s.slice(16380, bytes);
}

module.exports = { TRICKY, sentences, fuzzStrings, combiningStrings, INVALID_UTF8_HEX, longText, fortuneEntries };
