// UTF-8 decoding that never fails: each maximal invalid subsequence reads as U+FFFD, exactly like Python's
// bytes.decode("utf-8", errors="replace") and the WHATWG decoder (Unicode "substitution of maximal subparts").
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace hpctrain::tokenize::utf8 {

inline constexpr char32_t kReplacementCharacter = 0xFFFD;

char32_t decode_multibyte(std::string_view text, size_t& pos);

// Decodes the scalar value starting at text[pos] (pos < text.size()) and advances pos past it; an invalid
// sequence yields U+FFFD and advances past its maximal invalid subpart (at least one byte).
inline char32_t decode(std::string_view text, size_t& pos) {
  const auto byte = static_cast<unsigned char>(text[pos]);
  if (byte < 0x80) {
    ++pos;
    return byte;
  }
  return decode_multibyte(text, pos);
}

// Appends the UTF-8 encoding of a Unicode scalar value.
inline void append(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    const char bytes[2] = {char(0xC0 | (cp >> 6)), char(0x80 | (cp & 0x3F))};
    out.append(bytes, 2);
  } else if (cp < 0x10000) {
    const char bytes[3] = {char(0xE0 | (cp >> 12)), char(0x80 | ((cp >> 6) & 0x3F)), char(0x80 | (cp & 0x3F))};
    out.append(bytes, 3);
  } else {
    const char bytes[4] = {char(0xF0 | (cp >> 18)), char(0x80 | ((cp >> 12) & 0x3F)),
                           char(0x80 | ((cp >> 6) & 0x3F)), char(0x80 | (cp & 0x3F))};
    out.append(bytes, 4);
  }
}

// True when text is well-formed UTF-8 (no overlongs, no surrogates, nothing above U+10FFFF, nothing truncated).
[[nodiscard]] bool is_valid(std::string_view text);

// Replaces each maximal invalid subsequence of text by U+FFFD (EF BF BD); returns whether anything was replaced.
bool replace_invalid(std::string& text);

// Number of scalar values in well-formed UTF-8 (counts the bytes that do not continue a sequence).
[[nodiscard]] size_t count_scalars(std::string_view valid_text);

}  // namespace hpctrain::tokenize::utf8
