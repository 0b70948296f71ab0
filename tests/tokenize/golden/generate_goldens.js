// Writes cases.jsonl (ids from Hugging Face tokenizers for the corpus in corpus.js, for every configuration in
// reference.js VARIANTS) and the tiny/ tokenizer folder (tokenizer.json saved by the reference).
// Usage: node generate_goldens.js <repo root>
'use strict';
const fs = require('fs');
const path = require('path');
const { VARIANTS, readVocab, buildBertTokenizer, setMaxLength, tk } = require('./reference')(require('tokenizers'));
const corpus = require('./corpus');

const repo = process.argv[2] || path.resolve(__dirname, '../../..');
const NO_TRUNCATION = 1000000;  // max_length that never truncates these inputs
const LONG_TEXT_FILE = 'long_text.txt';

// Each case: { variant, text | text_hex, text_pair?, max_length }.
function singles(variant, texts, maxLengths) {
  return texts.flatMap((text) => maxLengths.map((max_length) => ({ variant, text, max_length })));
}

function pairs(variant, texts, maxLengths) {
  const out = [];
  for (let i = 0; i < texts.length; i++) {
    for (const j of [(i + 1) % texts.length, (i + 7) % texts.length]) {
      for (const max_length of maxLengths) out.push({ variant, text: texts[i], text_pair: texts[j], max_length });
    }
  }
  return out;
}

function buildCases() {
  const sentences = corpus.sentences(), fuzz = corpus.fuzzStrings(), combining = corpus.combiningStrings();
  const everything = [...corpus.TRICKY, ...sentences, ...fuzz, ...combining];
  const short = ['', 'Hello', 'a b c', 'café', '中文字符', 'x[SEP]y', ...sentences.slice(0, 12), ...corpus.TRICKY.slice(20, 40)];
  const cases = [];
  for (const variant of Object.keys(VARIANTS)) {
    cases.push(...singles(variant, everything, [NO_TRUNCATION]));
    cases.push(...singles(variant, corpus.INVALID_UTF8_HEX.map((h) => Buffer.from(h, 'hex')), [NO_TRUNCATION]));
  }
  for (const variant of ['uncased', 'cased']) {
    cases.push(...singles(variant, [...sentences.slice(0, 40), ...corpus.TRICKY.slice(0, 60)], [2, 3, 8, 16]));
    cases.push(...pairs(variant, short, [3, 8, 9, 16, 17, 512]));
    cases.push(...short.map((text) => ({ variant, text, text_pair: text, max_length: 16 })));
    cases.push(...pairs(variant, sentences.slice(40, 70), [16, 33, 128]));
  }
  // Pair truncation around the early stop (each sequence stops at max_length tokens, at a word boundary): words
  // of one piece ("a") and of five pieces ("xqzvw"), both orders, lengths across max_length.
  const words = (n, word) => Array(n).fill(word).join(' ');
  for (const ml of [4, 7, 8, 11]) {
    for (const [n1, w1] of [[2, 'a'], [7, 'a'], [9, 'a'], [2, 'xqzvw'], [3, 'xqzvw'], [5, 'xqzvw']]) {
      for (const [n2, w2] of [[1, 'b'], [6, 'b'], [8, 'b'], [12, 'b'], [2, 'xqzvw'], [4, 'xqzvw']]) {
        cases.push({ variant: 'uncased', text: words(n1, w1), text_pair: words(n2, w2), max_length: ml });
        cases.push({ variant: 'uncased', text: words(n2, w2), text_pair: words(n1, w1), max_length: ml });
      }
    }
  }
  cases.push({ variant: 'uncased', text: 'a [SEP] b [MASK] c d e f', text_pair: 'x y z w v u t s', max_length: 7 });
  // One text longer than the 16 KiB normalization chunk, stored once in long_text.txt.
  const long = { file: LONG_TEXT_FILE };
  cases.push(...singles('uncased', [long], [NO_TRUNCATION, 128]), ...singles('strip_cased', [long], [NO_TRUNCATION]));
  cases.push({ variant: 'uncased', text: long, text_pair: 'short pair', max_length: 512 });
  return cases;
}

async function encodeCase(tokenizer, c) {
  setMaxLength(tokenizer, c.max_length);
  const isBytes = Buffer.isBuffer(c.text), isFile = typeof c.text === 'object' && !isBytes;
  let text = c.text;
  if (isBytes) text = new TextDecoder('utf-8').decode(c.text);  // WHATWG: U+FFFD per maximal subpart
  if (isFile) text = fs.readFileSync(path.join(__dirname, c.text.file), 'utf8');
  const encoding = await tokenizer.encode(text, c.text_pair === undefined ? null : c.text_pair);
  const out = { variant: c.variant };
  if (isFile) {
    out.text_file = c.text.file;
  } else if (isBytes) {
    out.text_hex = c.text.toString('hex');
    out.replaced_hex = Buffer.from(text, 'utf8').toString('hex');
  } else {
    out.text = c.text;
  }
  if (c.text_pair !== undefined) out.text_pair = c.text_pair;
  out.max_length = c.max_length;
  out.input_ids = encoding.getIds();
  out.token_type_ids = encoding.getTypeIds();
  return out;
}

// A small tokenizer folder whose tokenizer.json the reference writes itself: tests load it through tokenizer.json
// and through vocab.txt + tokenizer_config.json and expect the "tiny" goldens both ways.
const TINY_VARIANT = { lowercase: false, stripAccents: true };
function tinyVocab() {
  const words = ['the', 'The', 'un', 'want', 'wanted', 'running', 'run', 'hello', 'world', 'cafe', 'over', 'dog'];
  const suffixes = ['##aff', '##able', '##ed', '##ing', '##ly', '##er'];
  const chars = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789'.split('');
  const punct = '!"#$%&\'()*+,-./:;<=>?@[\\]^_`{|}~'.split('');
  const tokens = ['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]', '[EOT]', ...words, ...suffixes, ...chars,
    ...chars.map((c) => '##' + c), ...punct, '中', '文', 'ß', '##ß', 'σ', 'ς', 'Σ'];
  return tokens;
}

function writeTiny(dir) {
  fs.mkdirSync(dir, { recursive: true });
  const tokens = tinyVocab();
  if (new Set(tokens).size !== tokens.length) throw new Error('tiny vocab has duplicates');
  fs.writeFileSync(path.join(dir, 'vocab.txt'), tokens.join('\n') + '\n');
  fs.writeFileSync(path.join(dir, 'tokenizer_config.json'), JSON.stringify({
    do_lower_case: false, strip_accents: true, tokenize_chinese_chars: true, model_max_length: 64,
    additional_special_tokens: ['[EOT]'], tokenizer_class: 'BertTokenizer' }, null, 2) + '\n');
  const vocab = readVocab(path.join(dir, 'vocab.txt'));
  const tokenizer = buildBertTokenizer(vocab, TINY_VARIANT);
  tokenizer.addSpecialTokens(['[EOT]']);
  tokenizer.save(path.join(dir, 'tokenizer.json'), true);
  return tokenizer;
}

function tinyCases() {
  const texts = ['The dog wanted running', 'unaffable unwanted', 'Café Über naïve', 'hello[EOT]world[SEP]',
    'Straße ΣΑΣ σας', '中文 and 文中', 'x'.repeat(100) + ' ' + 'y'.repeat(101), '¿Qué? ¡Hola!', 'Mr. O\'Neil (42)',
    ...corpus.sentences(20)];
  return [...singles('tiny', texts, [NO_TRUNCATION, 8]), ...pairs('tiny', texts.slice(0, 10), [9, 64])];
}

// BertNormalizer output (not ids) for strings whose tokens would hide differences: mark orderings and rare scripts
// end up as [UNK] whatever their normalized form is.
function normalizerCases() {
  const all = [];
  for (let mask = 0; mask < 16; mask++) {
    all.push({ cleanText: !!(mask & 1), handleChineseChars: !!(mask & 2), stripAccents: !!(mask & 4), lowercase: !!(mask & 8) });
  }
  const variantsOnly = all.filter((o) => o.cleanText && o.handleChineseChars).concat([all[12]]);
  const lines = [];
  const add = (options, texts) => {
    const normalizer = tk.bertNormalizer(options);
    for (const text of texts) lines.push(JSON.stringify({ options, text, normalized: normalizer.normalizeString(text) }));
  };
  for (const options of all.filter((o) => o.stripAccents)) add(options, corpus.combiningStrings());
  for (const options of variantsOnly) add(options, corpus.TRICKY.filter((t) => t.length <= 80));
  return lines;
}

async function main() {
  const vocab = readVocab(path.join(repo, 'data/bert-base-uncased/vocab.txt'));
  const tokenizers = {};
  for (const [name, variant] of Object.entries(VARIANTS)) tokenizers[name] = buildBertTokenizer(vocab, variant);
  tokenizers.tiny = writeTiny(path.join(__dirname, 'tiny'));
  fs.writeFileSync(path.join(__dirname, LONG_TEXT_FILE), corpus.longText(24000));
  const lines = [];
  for (const c of [...buildCases(), ...tinyCases()]) {
    lines.push(JSON.stringify(await encodeCase(tokenizers[c.variant], c)));
  }
  fs.writeFileSync(path.join(__dirname, 'cases.jsonl'), lines.join('\n') + '\n');
  fs.writeFileSync(path.join(__dirname, 'normalizer_cases.jsonl'), normalizerCases().join('\n') + '\n');
  const version = require('tokenizers/package.json').version;
  fs.writeFileSync(path.join(__dirname, 'generated_by.json'), JSON.stringify({
    tokenizers_npm_version: version, node_version: process.version, cases: lines.length,
    variants: Object.assign({ tiny: TINY_VARIANT }, VARIANTS) }, null, 2) + '\n');
  console.log(`wrote ${lines.length} cases (tokenizers ${version})`);
}

main().catch((e) => { console.error(e); process.exit(1); });
