// BertNormalizer: clean_text, handle_chinese_chars, strip_accents (NFD, drop Mn), lowercase -- in that order,
// character for character as Hugging Face tokenizers does it (see Note [Unicode versions] in src/tokenize/unicode.hpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace hpctrain::tokenize {

struct NormalizerOptions {
  bool clean_text = true;            // drop U+0000, U+FFFD, Cc/Cf/Co/Cs except \t\n\r; map whitespace to ' '
  bool handle_chinese_chars = true;  // surround CJK ideographs with spaces
  bool strip_accents = true;         // NFD, then drop nonspacing marks (Mn)
  bool lowercase = true;             // Rust char::to_lowercase, one character at a time
};

class BertNormalizer {
 public:
  explicit BertNormalizer(NormalizerOptions options = {});

  // Writes the normalized text to out (cleared first). Input that is not valid UTF-8 reads as if each maximal
  // invalid subsequence were U+FFFD. Output is always valid UTF-8.
  void normalize(std::string_view text, std::string& out) const;
  [[nodiscard]] std::string normalize(std::string_view text) const;

  [[nodiscard]] const NormalizerOptions& options() const { return options_; }

 private:
  class Run;  // one normalize() call's state (pending non-starters)

  size_t append_ascii_run(std::string_view text, size_t pos, std::string& out) const;

  enum AsciiAction : uint8_t { kKeep, kDrop, kSpace };
  NormalizerOptions options_;
  AsciiAction ascii_action_[128];
  char ascii_output_[128];
};

}  // namespace hpctrain::tokenize
