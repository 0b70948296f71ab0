// Per-code-point properties for the BERT normalizer and pre-tokenizer, as Hugging Face tokenizers sees them.
// Note [Unicode versions]: tokenizers classifies with tables frozen at about Unicode 9 (unicode_categories,
// unicode-normalization-alignments) but lowercases with Rust std (Unicode 16+). The tables in unicode_tables.cpp
// are observed from the reference itself (tests/tokenize/golden/gen_unicode_tables.js), not from utf8proc.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace hpctrain::tokenize::detail {

enum CodepointFlag : uint8_t {
  kDropFlag = 1 << 0,         // clean_text removes it
  kWhitespaceFlag = 1 << 1,   // clean_text maps it to ' '; the pre-tokenizer splits on it
  kPunctuationFlag = 1 << 2,  // the pre-tokenizer isolates it
  kChineseFlag = 1 << 3,      // handle_chinese_chars pads it with spaces
  kMarkFlag = 1 << 4,         // strip_accents removes it after NFD
  kDecomposesFlag = 1 << 5,   // NFD changes it
  kLowercaseFlag = 1 << 6,    // lowercase changes it
  kNonStarterFlag = 1 << 7,   // canonical combining class != 0 (NFD reorders runs of these)
};

// Flags of a scalar value (two-stage table built once, thread-safe).
[[nodiscard]] uint8_t codepoint_flags(char32_t cp);

// Canonical combining class (0 for starters).
[[nodiscard]] uint8_t combining_class(char32_t cp);

// Appends the full canonical decomposition of cp (cp itself when it has none).
void append_decomposition(char32_t cp, std::vector<char32_t>& out);

// Appends Rust's char::to_lowercase(cp) as UTF-8 (one or two scalar values).
void append_lowercase_utf8(char32_t cp, std::string& out);

}  // namespace hpctrain::tokenize::detail
