// BertPreTokenizer with a byte-class table: runs of ASCII word bytes are skipped in a tight loop.
#include "hpctrain/tokenize/pre_tokenizer.hpp"

#include "hpctrain/tokenize/utf8.hpp"
#include "tokenize/unicode.hpp"

#include <array>

namespace hpctrain::tokenize {
namespace {

enum CharClass : uint8_t { kWordChar, kSpace, kPunctuation, kMultibyte };

CharClass classify(char32_t cp) {
  const uint8_t flags = detail::codepoint_flags(cp);
  if (flags & detail::kWhitespaceFlag) return kSpace;
  if (flags & detail::kPunctuationFlag) return kPunctuation;
  return kWordChar;
}

// Class of each byte value: ASCII characters classified, every other byte starts (or continues) a multibyte one.
const std::array<CharClass, 256>& byte_classes() {
  static const std::array<CharClass, 256> classes = [] {
    std::array<CharClass, 256> table{};
    for (char32_t byte = 0; byte < 256; ++byte) table[byte] = byte < 0x80 ? classify(byte) : kMultibyte;
    return table;
  }();
  return classes;
}

}  // namespace

void BertPreTokenizer::split(std::string_view text, std::vector<std::string_view>& words) {
  const auto& classes = byte_classes();
  size_t word_start = 0, pos = 0;
  while (pos < text.size()) {
    CharClass cls = classes[static_cast<unsigned char>(text[pos])];
    if (cls == kWordChar) {
      ++pos;
      continue;
    }
    const size_t char_start = pos;
    if (cls == kMultibyte) {
      cls = classify(utf8::decode(text, pos));
      if (cls == kWordChar) continue;
    } else {
      ++pos;
    }
    if (char_start > word_start) words.push_back(text.substr(word_start, char_start - word_start));
    if (cls == kPunctuation) words.push_back(text.substr(char_start, pos - char_start));
    word_start = pos;
  }
  if (pos > word_start) words.push_back(text.substr(word_start, pos - word_start));
}

std::vector<std::string_view> BertPreTokenizer::split(std::string_view text) {
  std::vector<std::string_view> words;
  split(text, words);
  return words;
}

}  // namespace hpctrain::tokenize
