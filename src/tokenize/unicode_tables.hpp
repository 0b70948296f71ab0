// Raw Unicode tables observed from Hugging Face tokenizers (generated into unicode_tables.cpp); sorted by code point.
#pragma once

#include <cstddef>
#include <cstdint>

namespace hpctrain::tokenize::detail {

struct CodepointRange {
  char32_t first;
  char32_t last;  // inclusive
};

struct CombiningClassRange {
  char32_t first;
  char32_t last;  // inclusive
  uint8_t combining_class;
};

// cp maps to kMappingPoolData[offset, offset + length).
struct CodepointMapping {
  char32_t cp;
  uint16_t offset;
  uint16_t length;
};

template <typename T>
struct Span {
  const T* data;
  size_t size;
  const T* begin() const { return data; }
  const T* end() const { return data + size; }
};

extern const Span<CodepointRange> kDrop;             // removed by clean_text (controls, formats, private use, U+0000, U+FFFD)
extern const Span<CodepointRange> kWhitespace;       // Rust char::is_whitespace
extern const Span<CodepointRange> kPunctuation;      // ASCII punctuation or Unicode P* (unicode_categories crate)
extern const Span<CodepointRange> kChinese;          // padded with spaces by handle_chinese_chars
extern const Span<CodepointRange> kNonspacingMark;   // Mn, removed by strip_accents after NFD
extern const Span<CombiningClassRange> kCombiningClass;  // non-zero canonical combining classes NFD sorts by
extern const Span<CodepointMapping> kDecomposition;  // full canonical decompositions, except Hangul syllables
extern const Span<CodepointMapping> kLowercase;      // Rust char::to_lowercase where it changes the character
extern const char32_t* const kMappingPoolData;

}  // namespace hpctrain::tokenize::detail
