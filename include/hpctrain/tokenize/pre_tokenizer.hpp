// BertPreTokenizer: splits normalized text into words -- whitespace separates words and is dropped, every
// punctuation character (ASCII punctuation or Unicode P*) becomes a word of its own.
#pragma once

#include <string_view>
#include <vector>

namespace hpctrain::tokenize {

class BertPreTokenizer {
 public:
  // Appends the words of text (views into text) to words. text must be valid UTF-8 (normalizer output is).
  static void split(std::string_view text, std::vector<std::string_view>& words);
  [[nodiscard]] static std::vector<std::string_view> split(std::string_view text);
};

}  // namespace hpctrain::tokenize
