// Builds Hugging Face tokenizers exactly as transformers' BertTokenizerFast does (BertConverter): the reference
// that tests/tokenize and bench/tokenize compare hpctrain against. Used by generate_*.js and bench/tokenize/hf_bench.js,
// each passing the `tokenizers` module from its own node_modules: require('./reference')(require('tokenizers')).
'use strict';
const fs = require('fs');

// The configurations the goldens cover (names are used in cases.jsonl).
const VARIANTS = {
  uncased: { lowercase: true, stripAccents: null },              // bert-base-uncased: strip_accents follows lowercase
  cased: { lowercase: false, stripAccents: false },               // bert-base-cased
  strip_cased: { lowercase: false, stripAccents: true },          // accents stripped, case kept
  lower_keep_accents: { lowercase: true, stripAccents: false },   // lowercase without NFD (full Rust lowercase)
};

const SPECIAL_TOKENS = ['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]'];

function readVocab(path) {
  // transformers' load_vocab: one token per line, id = line number.
  const lines = fs.readFileSync(path, 'utf8').split('\n');
  if (lines[lines.length - 1] === '') lines.pop();
  const vocab = {};
  lines.forEach((token, id) => { vocab[token] = id; });
  return vocab;
}

// Returns a tokenizers.Tokenizer configured like BertTokenizerFast(vocab_file, do_lower_case, strip_accents).
function buildBertTokenizer(tk, vocab, variant) {
  const model = tk.WordPiece.init(vocab, { unkToken: '[UNK]', continuingSubwordPrefix: '##', maxInputCharsPerWord: 100 });
  const tokenizer = new tk.Tokenizer(model);
  const normalizerOptions = { cleanText: true, handleChineseChars: true, lowercase: variant.lowercase };
  if (variant.stripAccents !== null) normalizerOptions.stripAccents = variant.stripAccents;
  tokenizer.setNormalizer(tk.bertNormalizer(normalizerOptions));
  tokenizer.setPreTokenizer(tk.bertPreTokenizer());
  const cls = vocab['[CLS]'], sep = vocab['[SEP]'];
  tokenizer.setPostProcessor(tk.templateProcessing('[CLS]:0 $A:0 [SEP]:0', '[CLS]:0 $A:0 [SEP]:0 $B:1 [SEP]:1',
    [['[CLS]', cls], ['[SEP]', sep]]));
  tokenizer.setDecoder(tk.wordPieceDecoder('##', true));
  // BertTokenizerFast registers its special tokens as added tokens (special, not normalized): a literal "[SEP]"
  // in the raw text becomes the [SEP] id.
  tokenizer.addSpecialTokens(SPECIAL_TOKENS.filter((t) => t in vocab));
  return tokenizer;
}

function setMaxLength(tokenizer, maxLength) {
  tokenizer.setTruncation(maxLength, { strategy: 'LongestFirst', stride: 0 });
}

module.exports = (tk) => ({
  VARIANTS, SPECIAL_TOKENS, readVocab, setMaxLength, tk,
  buildBertTokenizer: (vocab, variant) => buildBertTokenizer(tk, vocab, variant),
});
