#!/usr/bin/env python3
"""Builds the byte-level BPE golden tokenizers and their reference ids with Hugging Face tokenizers/transformers.

Writes, next to this script:
  gpt2/    tokenizer.json + tokenizer_config.json: ByteLevel pre-tokenizer (GPT-2 regex), ByteLevel post-processor
           and decoder, merges as "a b" strings, <|endoftext|> special.
  llama3/  tokenizer.json + tokenizer_config.json: Sequence[Split(Llama-3 regex, isolated), ByteLevel(use_regex=
           false)], TemplateProcessing "<|begin_of_text|> $A", ignore_merges true (plus vocab-only words so that it
           matters), merges as ["a", "b"] pairs, specials <|begin_of_text|> <|end_of_text|> <|eot_id|> and a
           non-special added token.
  qwen2/   the llama3 vocabulary with Qwen2's choices: NFC normalizer, single digits, ByteLevel post-processor,
           ignore_merges false.
  cases.json  {"generated_by": {...}, "cases": [{"style", "text", "input_ids", "decoded"}]}: input_ids from
           AutoTokenizer(dir)(text)["input_ids"], decoded from AutoTokenizer.decode(ids) (special tokens kept,
           clean_up_tokenization_spaces=False), which equals tokenizers' Tokenizer.decode; pieces from the
           pre-tokenizer alone on the raw text (pre_tokenize_str: regex splits, byte-level characters), which checks
           the regex engine piece by piece even where BPE would hide a difference.

Usage: /path/to/venv/bin/python generate_bpe_goldens.py   (needs: pip install tokenizers transformers)
Deterministic: the corpus is seeded and the trainer is single-pass over a fixed corpus.
"""
import json
import os
import random
import sys
import tempfile

import tokenizers
import transformers
from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

HERE = os.path.dirname(os.path.abspath(__file__))
LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
                  r"\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
                 r"\s*[\r\n]+|\s+(?!\S)|\s+")
LICENSES = "/usr/share/common-licenses"
VOCAB_SIZE = 1500

# Hand-picked texts: every pre-tokenizer branch, contractions, whitespace kinds, numbers, scripts, emoji.
HAND_PICKED = [
    "", " ", "  ", "\n", "\r\n", "\t", "Hello world", "Hello, world!", " leading space", "trailing space ",
    "  two leading", "two trailing  ", "a  b   c    d", "tab\there", "tabs\t\t\tthree", "line1\nline2",
    "line1\r\nline2\r\n", "para\n\n\nbreak", "  \n  \n", " \t \n \r\n ", "\n\n", "x\n", "\nx",
    "It's", "it's", "IT'S", "I'm", "I'M", "you're", "YOU'RE", "we've", "WE'VE", "he'll", "HE'LL", "she'd", "SHE'D",
    "don't", "DON'T", "Don'T", "'s", "'S", "'tis", "rock 'n' roll", "O'Neil's", "the dog's bone", "'''", "' s",
    "ſ'ſ", "'ſ", "K'K",  # long s and Kelvin sign fold to s / k under (?i)
    "0", "1", "12", "123", "1234", "12345", "123456789", "3.14159", "1,000,000", "2024-06-01", "v1.2.3",
    "phone: +1 (555) 010-9999", "99 bottles", "x1y22z333w4444", "١٢٣٤٥", "٣.١٤", "Ⅻ ⅻ", "½ ¾ ⅞", "²³¹", "𝟘𝟙𝟚",
    "ｆｕｌｌ　ｗｉｄｔｈ　１２３", "Grüße aus Köln", "naïve café résumé", "Ελληνικά γράμματα", "Русский текст, да.",
    "עברית שפה", "العربية لغة", "हिन्दी भाषा", "தமிழ்", "ภาษาไทย", "中文字符测试", "日本語のテキスト、カタカナ",
    "한국어 텍스트", "Tiếng Việt có dấu", "ქართული", "Հայերեն", "ᚠᚢᚦᚨᚱᚲ", "𐌰𐌱𐌲", "ꦗꦮ",
    "e\u0301", "a\u0308\u0301", "\u0301", " \u0301x", "Z\u0351\u036b\u0343\u036a\u0302\u036b\u033d\u034f\u0334",
    "\u1100\u1161\u11a8", "\u00c5 \u212b \u0041\u030a",  # NFC: precomposed, Angstrom sign, decomposed
    "😀", "😀😀😀", "👍🏽", "👨‍👩‍👧‍👦", "🏳️‍🌈", "🇩🇪🇫🇷", "I ❤️ NY", "emoji😀inside", "a 🤖 b", "#️⃣", "✈︎",
    "\u200b", "a\u200bb", "\ufeffBOM", "a\u00a0b", "a\u2003b", "a\u3000b", "a\u180eb", "a\u0085b", "a\u2028b",
    "a\u2029b", "!\u180e!", ".\u180e\u180e.", "x \u180e!", "\u180e\n", "\u180e \u180e", "a\u180e", "1\u180e2", "a\u000bb", "a\u000cb", "a\u001cb", "a\u001fb", "\u00a0\u00a0", " \u00a0x", "\u2003\n",
    "<|endoftext|>", "<|begin_of_text|>", "<|eot_id|>", "<|end_of_text|>", "a<|endoftext|>b",
    "Hi <|endoftext|> there", "<|endoftext|><|endoftext|>", "<|begin_of_text|>Hello<|eot_id|>",
    "  <|eot_id|>  ", "<|eot_id|\n", "<|endoftext", "<|unknown|>", "<|begin_of_text|><|begin_of_text|>",
    "x <|end_of_text|>\n", "[TOOL] call", "a[TOOL]b", "[TOOL][TOOL]", "[TOO", "<|eot_id|>[TOOL]<|endoftext|>",
    "def f(x):\n    return x ** 2\n", "if (a && b) { c++; }", "<html><body>hi</body></html>",
    "https://example.com/path?q=1&r=2#frag", "user@example.org", "$100.00 & 50% off!!!", "...", "?!?!", "---",
    "(parenthesis)", "\"quoted\"", "«guillemets»", "„German“", "‘smart’ “quotes”", "C:\\Windows\\path",
    "snake_case_name", "camelCaseName", "ALLCAPS", "MiXeD cAsE", "tab\t\tand  spaces\n\n",
    "    indented code", "\t\tindented", "end with newline\n", "end with spaces   ", "   ", "\t", "\r", "\r\r\n",
    "a\rb", "x" * 300, "ab" * 200, " " * 100, "\n" * 50, "9" * 100, "😀" * 40, "é" * 50,
    "The quick brown fox jumps over the lazy dog.", "THE QUICK BROWN FOX", "the GNU General Public License",
]

SCRIPT_RANGES = [  # (first, last) code points of letters/digits/symbols from several scripts
    (0x41, 0x7A), (0xC0, 0x24F), (0x370, 0x3FF), (0x400, 0x4FF), (0x530, 0x58F), (0x5D0, 0x5EA), (0x620, 0x64A),
    (0x660, 0x669), (0x900, 0x97F), (0xE01, 0xE5B), (0x10A0, 0x10FF), (0x3040, 0x30FF), (0x4E00, 0x4FFF),
    (0xAC00, 0xAD00), (0x2000, 0x206F), (0x20A0, 0x20BF), (0x2190, 0x21FF), (0x2600, 0x26FF), (0x1F300, 0x1F64F),
    (0x1F900, 0x1F9FF), (0x0300, 0x036F), (0xFF00, 0xFFEF), (0x1D400, 0x1D7FF),
]
PIECES = [" ", "  ", "\n", "\r\n", "\t", "'s", "'T", "'ll", "'RE", "123", "45678", "0", ".", ",", "!", "?", "—",
          "<|endoftext|>", "<|eot_id|>", "<|begin_of_text|>", "[TOOL]", "😀", "👨‍👩‍👧", "\u0301", "\u00a0", "  \n",
          "don't", "I'm", "we'd", "cat", "Dog", "ÉCOLE", "ß", "中文", "мир", "١٢", "\t\t", " \n \n"]


def license_lines():
    lines = []
    for name in sorted(os.listdir(LICENSES)):
        path = os.path.join(LICENSES, name)
        if os.path.isfile(path) and not os.path.islink(path):
            with open(path, encoding="utf-8", errors="replace") as f:
                lines += f.read().split("\n")
    return lines


def training_corpus():
    text = []
    for name in sorted(os.listdir(LICENSES)):
        path = os.path.join(LICENSES, name)
        if os.path.isfile(path) and not os.path.islink(path):
            with open(path, encoding="utf-8", errors="replace") as f:
                text.append(f.read())
    return text + HAND_PICKED * 3


def random_texts(rng, lines):
    texts = []
    for _ in range(120):  # license lines, some joined with their neighbour and its newline kept
        i = rng.randrange(len(lines) - 1)
        texts.append(lines[i] if rng.random() < 0.5 else lines[i] + rng.choice(["\n", "\r\n", "\n\n"]) + lines[i + 1])
    for _ in range(100):  # random pieces glued together
        texts.append("".join(rng.choice(PIECES + [" "] * 4) for _ in range(rng.randint(1, 12))))
    for _ in range(80):  # random code points from several scripts, with spaces and digits between
        out = []
        for _ in range(rng.randint(1, 20)):
            first, last = rng.choice(SCRIPT_RANGES)
            out.append(chr(rng.randint(first, last)))
            if rng.random() < 0.2:
                out.append(rng.choice([" ", "  ", "\n", str(rng.randint(0, 99999))]))
        texts.append("".join(out))
    for _ in range(30):  # numbers of every length, signs and separators
        texts.append(rng.choice(["", " ", "-", "+", "$"]) + str(rng.randint(0, 10 ** rng.randint(1, 25))) +
                     rng.choice(["", ".", ".5", " ", "\n", "%", "th"]))
    return texts


def bpe_model():
    return models.BPE(unk_token=None, fuse_unk=False, byte_fallback=False)


def train(tokenizer, specials):
    trainer = trainers.BpeTrainer(vocab_size=VOCAB_SIZE, min_frequency=2, special_tokens=specials,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tokenizer.train_from_iterator(training_corpus(), trainer)


def make_gpt2():
    tokenizer = Tokenizer(bpe_model())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.post_processor = processors.ByteLevel(trim_offsets=False)
    train(tokenizer, ["<|endoftext|>"])
    return tokenizer, {"bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>"}


def llama_style_pre_tokenizer(pattern):
    return pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(pattern), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])


def make_llama3():
    tokenizer = Tokenizer(bpe_model())
    tokenizer.pre_tokenizer = llama_style_pre_tokenizer(LLAMA3_PATTERN)
    tokenizer.decoder = decoders.ByteLevel()
    specials = ["<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>"]
    train(tokenizer, specials)
    tokenizer.add_tokens([tokenizers.AddedToken("[TOOL]", normalized=True, special=False)])
    tokenizer.post_processor = processors.Sequence([
        processors.ByteLevel(trim_offsets=False),
        processors.TemplateProcessing(single="<|begin_of_text|> $A", pair="<|begin_of_text|> $A <|begin_of_text|> $B:1",
                                      special_tokens=[("<|begin_of_text|>", tokenizer.token_to_id("<|begin_of_text|>"))])])
    return tokenizer, {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"}


def with_vocab_only_words(data):
    """Adds whole words to the vocabulary without merges: with ignore_merges they are emitted as one token."""
    vocab = data["model"]["vocab"]
    next_id = max(vocab.values()) + 1
    for word in ["ĠLicense", "Ġsoftware", "Ġthe", "Ġcopyright", "License", "ĠGNU", "Ġzebra", "123", "Ġhello"]:
        if word not in vocab:
            vocab[word] = next_id
            next_id += 1
    for token in data["added_tokens"]:  # non-special added tokens follow the model's vocabulary
        if token["content"] not in vocab:
            token["id"] = next_id
            next_id += 1
    data["model"]["ignore_merges"] = True
    return data


def save(style, tokenizer, config, edit=None):
    folder = os.path.join(HERE, style)
    os.makedirs(folder, exist_ok=True)
    data = json.loads(tokenizer.to_str())
    if edit:
        data = edit(data)
    with tempfile.TemporaryDirectory() as tmp:  # round trip through the library so the file is what it writes
        path = os.path.join(tmp, "tokenizer.json")
        with open(path, "w", encoding="utf-8") as f:
            json.dump(data, f, ensure_ascii=False)
        fast = transformers.PreTrainedTokenizerFast(tokenizer_file=path, **config)
        fast.save_pretrained(folder)
    for extra in ["special_tokens_map.json", "chat_template.jinja"]:
        if os.path.exists(os.path.join(folder, extra)):
            os.remove(os.path.join(folder, extra))
    return folder


def merges_as_strings(data):
    data["model"]["merges"] = [" ".join(pair) if isinstance(pair, list) else pair for pair in data["model"]["merges"]]
    return data


def rewrite_merges_as_strings(folder):
    """save_pretrained writes the newer ["a", "b"] form; gpt2/ keeps the older "a b" form to test both."""
    path = os.path.join(folder, "tokenizer.json")
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(merges_as_strings(data), f, ensure_ascii=False, indent=1)


def make_qwen2(llama_folder):
    with open(os.path.join(llama_folder, "tokenizer.json"), encoding="utf-8") as f:
        data = json.load(f)
    tokenizer = Tokenizer.from_str(json.dumps(data))
    tokenizer.normalizer = normalizers.NFC()
    tokenizer.pre_tokenizer = llama_style_pre_tokenizer(QWEN2_PATTERN)
    tokenizer.post_processor = processors.ByteLevel(trim_offsets=False)
    return tokenizer, {"eos_token": "<|end_of_text|>"}, without_ignore_merges


def without_ignore_merges(data):
    data["model"]["ignore_merges"] = False
    return data


def golden_cases(style, folder, texts):
    auto = transformers.AutoTokenizer.from_pretrained(folder)
    raw = Tokenizer.from_file(os.path.join(folder, "tokenizer.json"))
    cases = []
    for text in texts:
        ids = auto(text)["input_ids"]
        decoded = auto.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False)
        assert decoded == raw.decode(ids, skip_special_tokens=False), (style, text)
        assert ids == raw.encode(text).ids, (style, text)
        pieces = [piece for piece, _ in raw.pre_tokenizer.pre_tokenize_str(text)]
        cases.append({"style": style, "text": text, "input_ids": ids, "decoded": decoded, "pieces": pieces})
    return cases


def main():
    rng = random.Random(20240601)
    texts = list(dict.fromkeys(HAND_PICKED + random_texts(rng, license_lines())))
    gpt2_folder = save("gpt2", *make_gpt2())
    rewrite_merges_as_strings(gpt2_folder)
    llama3_folder = save("llama3", *make_llama3(), edit=with_vocab_only_words)
    qwen2_tokenizer, qwen2_config, qwen2_edit = make_qwen2(llama3_folder)
    qwen2_folder = save("qwen2", qwen2_tokenizer, qwen2_config, edit=qwen2_edit)
    cases = []
    for style, folder in [("gpt2", gpt2_folder), ("llama3", llama3_folder), ("qwen2", qwen2_folder)]:
        cases += golden_cases(style, folder, texts)
    out = {"generated_by": {"tokenizers": tokenizers.__version__, "transformers": transformers.__version__,
                            "python": sys.version.split()[0], "texts_per_style": len(texts)},
           "cases": cases}
    with open(os.path.join(HERE, "cases.json"), "w", encoding="utf-8") as f:  # one case per line
        f.write('{"generated_by": ' + json.dumps(out["generated_by"]) + ',\n"cases": [\n')
        f.write(",\n".join(json.dumps(c, ensure_ascii=False, separators=(",", ":")) for c in cases) + "\n]}\n")
    print(f"{len(texts)} texts per style, {len(cases)} cases")


if __name__ == "__main__":
    main()
