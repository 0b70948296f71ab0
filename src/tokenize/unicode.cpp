// Two-stage code point flag table built from the observed tables, plus decomposition and lowercase lookups.
#include "tokenize/unicode.hpp"

#include "hpctrain/tokenize/utf8.hpp"
#include "tokenize/unicode_tables.hpp"

#include <algorithm>
#include <array>
#include <string_view>
#include <unordered_map>

namespace hpctrain::tokenize::detail {
namespace {

constexpr char32_t kCodepointCount = 0x110000;
constexpr int kBlockBits = 8;  // 256 code points per second-stage block
constexpr char32_t kBlockSize = char32_t(1) << kBlockBits;

constexpr char32_t kHangulFirst = 0xAC00, kHangulLast = 0xD7A3;
constexpr char32_t kHangulLeadFirst = 0x1100, kHangulVowelFirst = 0x1161, kHangulTrailBase = 0x11A7;
constexpr char32_t kHangulVowels = 21, kHangulTrails = 28;

// Identical blocks are stored once: most of the code space shares a handful of blocks.
class FlagTable {
 public:
  FlagTable() {
    std::vector<uint8_t> flat(kCodepointCount, 0);
    mark(flat, kDrop, kDropFlag);
    mark(flat, kWhitespace, kWhitespaceFlag);
    mark(flat, kPunctuation, kPunctuationFlag);
    mark(flat, kChinese, kChineseFlag);
    mark(flat, kNonspacingMark, kMarkFlag);
    for (const auto& range : kCombiningClass) mark_range(flat, range.first, range.last, kNonStarterFlag);
    for (const auto& mapping : kDecomposition) flat[mapping.cp] |= kDecomposesFlag;
    mark_range(flat, kHangulFirst, kHangulLast, kDecomposesFlag);
    for (const auto& mapping : kLowercase) flat[mapping.cp] |= kLowercaseFlag;
    compress(flat);
  }

  uint8_t operator[](char32_t cp) const {
    if (cp >= kCodepointCount) return 0;
    return blocks_[(size_t(block_index_[cp >> kBlockBits]) << kBlockBits) | (cp & (kBlockSize - 1))];
  }

 private:
  static void mark_range(std::vector<uint8_t>& flat, char32_t first, char32_t last, uint8_t flag) {
    for (char32_t cp = first; cp <= last; ++cp) flat[cp] |= flag;
  }
  static void mark(std::vector<uint8_t>& flat, Span<CodepointRange> ranges, uint8_t flag) {
    for (const auto& range : ranges) mark_range(flat, range.first, range.last, flag);
  }

  void compress(const std::vector<uint8_t>& flat) {
    std::unordered_map<std::string_view, uint16_t> seen;
    std::vector<std::string_view> unique;
    for (char32_t block = 0; block < kCodepointCount / kBlockSize; ++block) {
      std::string_view bytes(reinterpret_cast<const char*>(flat.data()) + block * kBlockSize, kBlockSize);
      auto [it, inserted] = seen.emplace(bytes, uint16_t(unique.size()));
      if (inserted) unique.push_back(bytes);
      block_index_[block] = it->second;
    }
    blocks_.reserve(unique.size() * kBlockSize);
    for (std::string_view bytes : unique) blocks_.insert(blocks_.end(), bytes.begin(), bytes.end());
  }

  std::array<uint16_t, kCodepointCount / kBlockSize> block_index_{};
  std::vector<uint8_t> blocks_;
};

const CodepointMapping* find_mapping(Span<CodepointMapping> table, char32_t cp) {
  const auto* it = std::lower_bound(table.begin(), table.end(), cp,
                                    [](const CodepointMapping& m, char32_t value) { return m.cp < value; });
  return it != table.end() && it->cp == cp ? it : nullptr;
}

}  // namespace

uint8_t codepoint_flags(char32_t cp) {
  static const FlagTable table;
  return table[cp];
}

uint8_t combining_class(char32_t cp) {
  const auto* it = std::lower_bound(kCombiningClass.begin(), kCombiningClass.end(), cp,
                                    [](const CombiningClassRange& r, char32_t value) { return r.last < value; });
  return it != kCombiningClass.end() && it->first <= cp ? it->combining_class : 0;
}

void append_decomposition(char32_t cp, std::vector<char32_t>& out) {
  if (cp >= kHangulFirst && cp <= kHangulLast) {  // algorithmic (Unicode section 3.12)
    const char32_t index = cp - kHangulFirst;
    out.push_back(kHangulLeadFirst + index / (kHangulVowels * kHangulTrails));
    out.push_back(kHangulVowelFirst + (index % (kHangulVowels * kHangulTrails)) / kHangulTrails);
    if (index % kHangulTrails != 0) out.push_back(kHangulTrailBase + index % kHangulTrails);
    return;
  }
  const CodepointMapping* mapping = find_mapping(kDecomposition, cp);
  if (mapping == nullptr) {
    out.push_back(cp);
    return;
  }
  out.insert(out.end(), kMappingPoolData + mapping->offset, kMappingPoolData + mapping->offset + mapping->length);
}

void append_lowercase_utf8(char32_t cp, std::string& out) {
  const CodepointMapping* mapping = find_mapping(kLowercase, cp);
  if (mapping == nullptr) {
    utf8::append(out, cp);
    return;
  }
  for (uint16_t k = 0; k < mapping->length; ++k) utf8::append(out, kMappingPoolData[mapping->offset + k]);
}

}  // namespace hpctrain::tokenize::detail
