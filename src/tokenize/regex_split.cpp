// PCRE2 wrapper for the pre-tokenizer regexes (see Note [Regex engine] in regex_split.hpp).
#define PCRE2_CODE_UNIT_WIDTH 8
#include "tokenize/regex_split.hpp"

#include "hpctrain/core/error.hpp"

#include <pcre2.h>

namespace hpctrain::tokenize::detail {
namespace {

std::string pcre2_message(int error_code) {
  PCRE2_UCHAR buffer[256];
  const int length = pcre2_get_error_message(error_code, buffer, sizeof(buffer));
  return length < 0 ? "error " + std::to_string(error_code) : std::string(reinterpret_cast<char*>(buffer), size_t(length));
}

// Oniguruma's \s (tokenizers' engine): U+0009..U+000D, U+0085 and the Z categories. PCRE2's \s also takes
// U+180E (Mongolian vowel separator, Cf since Unicode 6.3), so \s and \S are spelled out.
constexpr const char* kOnigSpaces = R"(\t-\r\x{85}\p{Z})";

// Rewrites \s and \S (outside and inside character classes) to Oniguruma's meaning; other escapes stay.
std::string translate_pattern(const std::string& pattern, const std::string& origin) {
  std::string out;
  int class_depth = 0;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      const char escaped = pattern[++i];
      if (escaped == 's') {
        out += class_depth > 0 ? std::string(kOnigSpaces) : "[" + std::string(kOnigSpaces) + "]";
      } else if (escaped == 'S') {
        HPCTRAIN_CHECK(class_depth == 0, "{}: \\S inside a character class is not supported (pattern \"{}\")", origin,
                       pattern);
        out += "[^" + std::string(kOnigSpaces) + "]";
      } else {
        out += c;
        out += escaped;
      }
      continue;
    }
    if (c == '[') {
      ++class_depth;
      out += c;
      if (i + 1 < pattern.size() && pattern[i + 1] == '^') out += pattern[++i];
      if (i + 1 < pattern.size() && pattern[i + 1] == ']') out += pattern[++i];  // a leading ] is literal
      continue;
    }
    if (c == ']' && class_depth > 0) --class_depth;
    out += c;
  }
  return out;
}

size_t next_char_boundary(std::string_view text, size_t pos) {
  ++pos;
  while (pos < text.size() && (static_cast<unsigned char>(text[pos]) & 0xC0) == 0x80) ++pos;
  return pos;
}

}  // namespace

struct Regex::Compiled {
  pcre2_code* code = nullptr;
  ~Compiled() { pcre2_code_free(code); }
};

Regex::Regex(const std::string& pattern, bool literal, const std::string& origin)
    : compiled_(std::make_unique<Compiled>()), pattern_(pattern), origin_(origin) {
  int error_code = 0;
  PCRE2_SIZE error_offset = 0;
  const uint32_t options = PCRE2_UTF | PCRE2_UCP | (literal ? PCRE2_LITERAL : 0);
  const std::string translated = literal ? pattern : translate_pattern(pattern, origin);
  compiled_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(translated.data()), translated.size(), options,
                                  &error_code, &error_offset, nullptr);
  if (compiled_->code == nullptr) {
    fail("{}: cannot compile the regex \"{}\" at offset {}: {}", origin, pattern, error_offset,
         pcre2_message(error_code));
  }
  // Without a JIT (some architectures, or a library built without it) the interpreter gives the same matches.
  (void)pcre2_jit_compile(compiled_->code, PCRE2_JIT_COMPLETE);
}

Regex::~Regex() = default;
Regex::Regex(Regex&&) noexcept = default;
Regex& Regex::operator=(Regex&&) noexcept = default;

void Regex::split_isolated(std::string_view text, std::vector<std::string_view>& out) const {
  std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> match(
      pcre2_match_data_create_from_pattern(compiled_->code, nullptr), &pcre2_match_data_free);
  HPCTRAIN_CHECK(match != nullptr, "{}: out of memory for regex match data", origin_);
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t piece_start = 0, search_from = 0;
  while (search_from < text.size()) {
    const int rc = pcre2_match(compiled_->code, subject, text.size(), search_from, PCRE2_NO_UTF_CHECK, match.get(),
                               nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) fail("{}: regex \"{}\" failed on a {}-byte text: {}", origin_, pattern_, text.size(), pcre2_message(rc));
    const PCRE2_SIZE* range = pcre2_get_ovector_pointer(match.get());
    const size_t start = range[0], end = range[1];
    if (start == end) {  // an empty match isolates nothing; search again from the next character
      search_from = next_char_boundary(text, start);
      continue;
    }
    if (start > piece_start) out.push_back(text.substr(piece_start, start - piece_start));
    out.push_back(text.substr(start, end - start));
    piece_start = search_from = end;
  }
  if (piece_start < text.size()) out.push_back(text.substr(piece_start));
}

}  // namespace hpctrain::tokenize::detail
