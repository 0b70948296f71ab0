// BertNormalizer: one pass over the input with an ASCII fast path; NFD reordering only when strip_accents is on.
#include "hpctrain/tokenize/normalizer.hpp"

#include "hpctrain/tokenize/utf8.hpp"
#include "tokenize/unicode.hpp"

#include <algorithm>
#include <vector>

namespace hpctrain::tokenize {

using detail::codepoint_flags;

// Note [NFD run order]: NFD sorts each maximal run of non-starters by combining class (stably). strip_accents then
// drops the nonspacing marks, so only the surviving non-starters need buffering; a starter -- even one that is then
// dropped -- ends the run. Characters removed by clean_text never reach NFD and so never end a run.
class BertNormalizer::Run {
 public:
  Run(const NormalizerOptions& options, std::string& out) : options_(options), out_(out) {}

  void ascii(char byte) {
    flush();
    out_ += byte;
  }

  // One scalar value after clean_text.
  void codepoint(char32_t cp, uint8_t flags) {
    if (options_.handle_chinese_chars && (flags & detail::kChineseFlag)) {
      ascii(' ');
      after_chinese(cp, flags);
      ascii(' ');
      return;
    }
    after_chinese(cp, flags);
  }

  void flush() {
    if (pending_.empty()) return;
    std::stable_sort(pending_.begin(), pending_.end(),
                     [](const Pending& a, const Pending& b) { return a.combining_class < b.combining_class; });
    for (const Pending& p : pending_) emit(p.cp, codepoint_flags(p.cp));
    pending_.clear();
  }

 private:
  struct Pending {
    uint8_t combining_class;
    char32_t cp;
  };

  void after_chinese(char32_t cp, uint8_t flags) {
    if (!options_.strip_accents) return emit(cp, flags);
    if (!(flags & (detail::kDecomposesFlag | detail::kMarkFlag | detail::kNonStarterFlag))) {
      flush();
      return emit(cp, flags);
    }
    decomposed_.clear();
    detail::append_decomposition(cp, decomposed_);
    for (char32_t part : decomposed_) stripped(part, codepoint_flags(part));
  }

  // One character of the NFD output.
  void stripped(char32_t cp, uint8_t flags) {
    const bool starter = !(flags & detail::kNonStarterFlag);
    if (starter) flush();
    if (flags & detail::kMarkFlag) return;
    if (starter) return emit(cp, flags);
    pending_.push_back({detail::combining_class(cp), cp});
  }

  void emit(char32_t cp, uint8_t flags) {
    if (options_.lowercase && (flags & detail::kLowercaseFlag)) return detail::append_lowercase_utf8(cp, out_);
    utf8::append(out_, cp);
  }

  const NormalizerOptions& options_;
  std::string& out_;
  std::vector<Pending> pending_;
  std::vector<char32_t> decomposed_;
};

BertNormalizer::BertNormalizer(NormalizerOptions options) : options_(options) {
  for (int byte = 0; byte < 128; ++byte) {
    const uint8_t flags = codepoint_flags(char32_t(byte));
    ascii_action_[byte] = !options_.clean_text               ? kKeep
                          : (flags & detail::kDropFlag)       ? kDrop
                          : (flags & detail::kWhitespaceFlag) ? kSpace
                                                              : kKeep;
    const bool lower = options_.lowercase && byte >= 'A' && byte <= 'Z';
    ascii_output_[byte] = ascii_action_[byte] == kSpace ? ' ' : char(lower ? byte + ('a' - 'A') : byte);
  }
}

void BertNormalizer::normalize(std::string_view text, std::string& out) const {
  out.clear();
  out.reserve(text.size() + text.size() / 4);
  Run run(options_, out);
  size_t pos = 0;
  while (pos < text.size()) {
    if (static_cast<unsigned char>(text[pos]) < 0x80) {
      run.flush();
      pos = append_ascii_run(text, pos, out);
      continue;
    }
    const char32_t cp = utf8::decode(text, pos);
    const uint8_t flags = codepoint_flags(cp);
    if (options_.clean_text && (flags & detail::kDropFlag)) continue;
    if (options_.clean_text && (flags & detail::kWhitespaceFlag)) {
      run.ascii(' ');
      continue;
    }
    run.codepoint(cp, flags);
  }
  run.flush();
}

// Appends the normalized run of ASCII bytes starting at pos (table-driven, no branches per byte); returns its end.
size_t BertNormalizer::append_ascii_run(std::string_view text, size_t pos, std::string& out) const {
  size_t end = pos;
  while (end < text.size() && static_cast<unsigned char>(text[end]) < 0x80) ++end;
  const size_t old_size = out.size();
  out.resize(old_size + (end - pos));
  char* dst = out.data() + old_size;
  for (; pos < end; ++pos) {
    const auto byte = static_cast<unsigned char>(text[pos]);
    *dst = ascii_output_[byte];
    dst += ascii_action_[byte] != kDrop;
  }
  out.resize(size_t(dst - out.data()));
  return end;
}

std::string BertNormalizer::normalize(std::string_view text) const {
  std::string out;
  normalize(text, out);
  return out;
}

}  // namespace hpctrain::tokenize
