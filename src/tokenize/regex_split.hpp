// Unicode regular expressions for pre-tokenizers (PCRE2 with UTF and Unicode properties, JIT-compiled when the
// library has a JIT), and the "Isolated" split of Hugging Face's Split pre-tokenizer.
// Note [Regex engine]: tokenizers uses Oniguruma; the GPT-2 / Llama-3 / Qwen2 patterns (\p{L}, \p{N}, \s, (?i:),
// (?!\S)) mean the same in PCRE2 with PCRE2_UCP except for two things. \s: PCRE2 also matches U+180E, so the
// constructor spells \s and \S out as Oniguruma's set. Unicode version: \p{L} / \p{N} follow the PCRE2 library's
// Unicode tables (10.42: Unicode 14) while tokenizers 0.23 knows Unicode 16, so letters and digits assigned in
// Unicode 15-16 (CJK Ext. H/I, Garay, Todhri, ...: about 9300 code points, none of them in common text) can split
// differently. tests/tokenize/bpe_golden_test.cpp holds the equivalence on its corpus.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace hpctrain::tokenize::detail {

class Regex {
 public:
  // Compiles pattern (Oniguruma syntax as in tokenizer.json); origin names it in errors ("tokenizer.json: field
  // 'pre_tokenizer.pattern.Regex'"). literal: pattern is a plain string (Split's {"String": ...}).
  Regex(const std::string& pattern, bool literal, const std::string& origin);
  ~Regex();
  Regex(Regex&&) noexcept;
  Regex& operator=(Regex&&) noexcept;

  // Splits valid UTF-8 text into the pieces between matches and the matches themselves, in order, dropping empty
  // pieces (SplitDelimiterBehavior::Isolated); appends them to out.
  void split_isolated(std::string_view text, std::vector<std::string_view>& out) const;

  [[nodiscard]] const std::string& pattern() const { return pattern_; }

 private:
  struct Compiled;
  std::unique_ptr<Compiled> compiled_;
  std::string pattern_;
  std::string origin_;
};

// GPT-2's pre-tokenizer pattern (ByteLevel with use_regex true).
inline constexpr const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

}  // namespace hpctrain::tokenize::detail
