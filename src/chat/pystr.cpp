// Python's str semantics on UTF-8 (pystr.hpp).
#include "chat/pystr.hpp"

#include <utf8proc.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>

#include "hpctrain/core/error.hpp"
#include "hpctrain/tokenize/utf8.hpp"

namespace hpctrain::chat::py {
namespace {

namespace utf8 = tokenize::utf8;

// Characters whose Python upper() / title() is a special (multi-character) mapping (SpecialCasing.txt,
// unconditional): ß, ŉ, ǰ, ΐ, ΰ, և, ẖ..ẚ, the Greek letters with psili or ypogegrammeni, the ligatures ﬀ..ﬆ, ﬓ..ﬗ.
constexpr std::array<std::pair<char32_t, char32_t>, 26> kSpecialUpper = {{
    {0xDF, 0xDF}, {0x149, 0x149}, {0x1F0, 0x1F0}, {0x390, 0x390}, {0x3B0, 0x3B0}, {0x587, 0x587},
    {0x1E96, 0x1E9A}, {0x1F50, 0x1F50}, {0x1F52, 0x1F52}, {0x1F54, 0x1F54}, {0x1F56, 0x1F56},
    {0x1F80, 0x1FAF}, {0x1FB2, 0x1FB4}, {0x1FB6, 0x1FB7}, {0x1FBC, 0x1FBC}, {0x1FC2, 0x1FC4},
    {0x1FC6, 0x1FC7}, {0x1FCC, 0x1FCC}, {0x1FD2, 0x1FD3}, {0x1FD6, 0x1FD7}, {0x1FE2, 0x1FE4},
    {0x1FE6, 0x1FE7}, {0x1FF2, 0x1FF4}, {0x1FF6, 0x1FF7}, {0x1FFC, 0x1FFC}, {0xFB00, 0xFB17},
}};

bool special_upper(char32_t c) {
  for (const auto& [first, last] : kSpecialUpper)
    if (c >= first && c <= last) return true;
  return false;
}

std::string describe(char32_t c) {
  std::string text;
  utf8::append(text, c);
  return fmt::format("'{}' (U+{:04X})", text, static_cast<uint32_t>(c));
}

char32_t to_lower(char32_t c) {
  if (c < 0x80) return c >= 'A' && c <= 'Z' ? c + 32 : c;
  // İ lowers to two characters; Σ lowers to σ or ς depending on its neighbours (Final_Sigma).
  if (c == 0x130 || c == 0x3A3) fail("lower-casing {} is not supported (Python's mapping depends on special rules)", describe(c));
  return static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(c)));
}

char32_t to_upper(char32_t c) {
  if (c < 0x80) return c >= 'a' && c <= 'z' ? c - 32 : c;
  if (special_upper(c)) fail("upper-casing {} is not supported (Python maps it to several characters)", describe(c));
  return static_cast<char32_t>(utf8proc_toupper(static_cast<utf8proc_int32_t>(c)));
}

char32_t to_title(char32_t c) {
  if (c < 0x80) return c >= 'a' && c <= 'z' ? c - 32 : c;
  if (special_upper(c)) fail("title-casing {} is not supported (Python maps it to several characters)", describe(c));
  return static_cast<char32_t>(utf8proc_totitle(static_cast<utf8proc_int32_t>(c)));
}

utf8proc_category_t category(char32_t c) { return utf8proc_category(static_cast<utf8proc_int32_t>(c)); }

bool is_cased(char32_t c) {
  const auto k = category(c);
  return k == UTF8PROC_CATEGORY_LU || k == UTF8PROC_CATEGORY_LL || k == UTF8PROC_CATEGORY_LT;
}

bool is_printable(char32_t c) {
  if (c == ' ') return true;
  switch (category(c)) {
    case UTF8PROC_CATEGORY_CC: case UTF8PROC_CATEGORY_CF: case UTF8PROC_CATEGORY_CS: case UTF8PROC_CATEGORY_CO:
    case UTF8PROC_CATEGORY_CN: case UTF8PROC_CATEGORY_ZL: case UTF8PROC_CATEGORY_ZP: case UTF8PROC_CATEGORY_ZS:
      return false;
    default:
      return true;
  }
}

// Byte offset of code point `index` (0 <= index <= length) in valid UTF-8.
std::size_t byte_offset(std::string_view text, int64_t index) {
  std::size_t pos = 0;
  for (int64_t i = 0; i < index && pos < text.size(); ++i) utf8::decode(text, pos);
  return pos;
}

template <typename Map>
std::string map_code_points(std::string_view text, Map map) {
  std::string out;
  out.reserve(text.size());
  std::size_t pos = 0;
  while (pos < text.size()) utf8::append(out, map(utf8::decode(text, pos)));
  return out;
}

}  // namespace

std::u32string decode(std::string_view text) {
  std::u32string out;
  out.reserve(text.size());
  std::size_t pos = 0;
  while (pos < text.size()) out.push_back(utf8::decode(text, pos));
  return out;
}

std::string encode(std::u32string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char32_t c : text) utf8::append(out, c);
  return out;
}

bool is_ascii(std::string_view text) {
  return std::all_of(text.begin(), text.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; });
}

int64_t length(std::string_view text) {
  if (is_ascii(text)) return static_cast<int64_t>(text.size());
  return static_cast<int64_t>(utf8::count_scalars(text));
}

bool is_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

std::string strip(std::string_view text, const std::optional<std::string>& chars, bool left, bool right) {
  const std::u32string set = chars ? decode(*chars) : std::u32string();
  const auto strippable = [&](char32_t c) { return chars ? set.find(c) != std::u32string::npos : is_space(c); };
  const std::u32string code_points = decode(text);
  std::size_t begin = 0, end = code_points.size();
  if (left)
    while (begin < end && strippable(code_points[begin])) ++begin;
  if (right)
    while (end > begin && strippable(code_points[end - 1])) --end;
  return encode(std::u32string_view(code_points).substr(begin, end - begin));
}

std::vector<std::string> split(std::string_view text, const std::optional<std::string>& separator, int64_t maxsplit,
                               bool from_right) {
  std::vector<std::string> parts;
  if (maxsplit < 0) maxsplit = std::numeric_limits<int64_t>::max();
  if (separator) {
    HPCTRAIN_CHECK(!separator->empty(), "split(): empty separator");
    if (!from_right) {
      std::size_t begin = 0;
      for (int64_t done = 0; done < maxsplit; ++done) {
        const std::size_t at = text.find(*separator, begin);
        if (at == std::string_view::npos) break;
        parts.emplace_back(text.substr(begin, at - begin));
        begin = at + separator->size();
      }
      parts.emplace_back(text.substr(begin));
      return parts;
    }
    std::size_t end = text.size();
    for (int64_t done = 0; done < maxsplit; ++done) {
      if (end < separator->size()) break;
      const std::size_t at = text.rfind(*separator, end - separator->size());
      if (at == std::string_view::npos) break;
      parts.emplace_back(text.substr(at + separator->size(), end - at - separator->size()));
      end = at;
    }
    parts.emplace_back(text.substr(0, end));
    std::reverse(parts.begin(), parts.end());
    return parts;
  }
  // Runs of whitespace; the ends are stripped, except the rest after the last split.
  const std::u32string code_points = decode(text);
  const auto n = static_cast<int64_t>(code_points.size());
  if (!from_right) {
    int64_t i = 0;
    int64_t done = 0;
    while (true) {
      while (i < n && is_space(code_points[i])) ++i;
      if (i == n) break;
      if (done == maxsplit) {
        int64_t end = n;
        parts.push_back(encode(std::u32string_view(code_points).substr(i, end - i)));
        break;
      }
      int64_t j = i;
      while (j < n && !is_space(code_points[j])) ++j;
      parts.push_back(encode(std::u32string_view(code_points).substr(i, j - i)));
      ++done;
      i = j;
    }
    return parts;
  }
  int64_t i = n;
  int64_t done = 0;
  while (true) {
    while (i > 0 && is_space(code_points[i - 1])) --i;
    if (i == 0) break;
    if (done == maxsplit) {
      parts.push_back(encode(std::u32string_view(code_points).substr(0, i)));
      break;
    }
    int64_t j = i;
    while (j > 0 && !is_space(code_points[j - 1])) --j;
    parts.push_back(encode(std::u32string_view(code_points).substr(j, i - j)));
    ++done;
    i = j;
  }
  std::reverse(parts.begin(), parts.end());
  return parts;
}

std::vector<std::string> splitlines(std::string_view text, bool keepends) {
  // Line boundaries of str.splitlines: \n \r \r\n \v \f \x1c \x1d \x1e \x85 \u2028 \u2029.
  const std::u32string code_points = decode(text);
  std::vector<std::string> lines;
  std::size_t begin = 0, i = 0;
  while (i < code_points.size()) {
    const char32_t c = code_points[i];
    const bool boundary = c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || c == 0x1C || c == 0x1D || c == 0x1E ||
                          c == 0x85 || c == 0x2028 || c == 0x2029;
    if (!boundary) {
      ++i;
      continue;
    }
    std::size_t end = i + 1;
    if (c == '\r' && end < code_points.size() && code_points[end] == '\n') ++end;
    lines.push_back(encode(std::u32string_view(code_points).substr(begin, (keepends ? end : i) - begin)));
    begin = i = end;
  }
  if (begin < code_points.size()) lines.push_back(encode(std::u32string_view(code_points).substr(begin)));
  return lines;
}

std::string replace(std::string_view text, std::string_view old, std::string_view replacement, int64_t count) {
  if (count < 0) count = std::numeric_limits<int64_t>::max();
  std::string out;
  if (old.empty()) {
    // Python inserts the replacement before every code point and at the end, up to count times.
    std::size_t pos = 0;
    int64_t done = 0;
    while (done < count) {
      out += replacement;
      ++done;
      if (pos == text.size()) break;
      const std::size_t start = pos;
      utf8::decode(text, pos);
      out += text.substr(start, pos - start);
    }
    out += text.substr(pos);
    return out;
  }
  std::size_t begin = 0;
  for (int64_t done = 0; done < count; ++done) {
    const std::size_t at = text.find(old, begin);
    if (at == std::string_view::npos) break;
    out += text.substr(begin, at - begin);
    out += replacement;
    begin = at + old.size();
  }
  out += text.substr(begin);
  return out;
}

int64_t find(std::string_view text, std::string_view sub, std::optional<int64_t> start, std::optional<int64_t> end,
             bool from_right) {
  const int64_t n = length(text);
  int64_t first = start.value_or(0), last = end.value_or(n);
  if (first < 0) first = std::max<int64_t>(0, first + n);
  if (last < 0) last = std::max<int64_t>(0, last + n);
  last = std::min(last, n);
  if (first > n || first > last) return -1;
  const std::size_t begin_byte = byte_offset(text, first), end_byte = byte_offset(text, last);
  const std::string_view window = text.substr(begin_byte, end_byte - begin_byte);
  const std::size_t at = from_right ? window.rfind(sub) : window.find(sub);
  if (at == std::string_view::npos) return -1;
  return first + length(window.substr(0, at));
}

int64_t count(std::string_view text, std::string_view sub) {
  if (sub.empty()) return length(text) + 1;
  int64_t found = 0;
  for (std::size_t at = text.find(sub); at != std::string_view::npos; at = text.find(sub, at + sub.size())) ++found;
  return found;
}

std::string lower(std::string_view text) { return map_code_points(text, to_lower); }
std::string upper(std::string_view text) { return map_code_points(text, to_upper); }

std::string swapcase(std::string_view text) {
  return map_code_points(text, [](char32_t c) {
    const auto k = category(c);
    if (k == UTF8PROC_CATEGORY_LU) return to_lower(c);
    if (k == UTF8PROC_CATEGORY_LL) return to_upper(c);
    return c;
  });
}

std::string title(std::string_view text) {
  bool previous_cased = false;
  return map_code_points(text, [&](char32_t c) {
    const char32_t mapped = previous_cased ? to_lower(c) : to_title(c);
    previous_cased = is_cased(c);
    return mapped;
  });
}

std::string capitalize(std::string_view text) {
  bool first = true;
  return map_code_points(text, [&](char32_t c) {
    const char32_t mapped = first ? to_title(c) : to_lower(c);
    first = false;
    return mapped;
  });
}

bool all_of_class(std::string_view text, CharClass what) {
  if (text.empty()) return false;
  bool any_cased = false;
  std::size_t pos = 0;
  while (pos < text.size()) {
    const char32_t c = utf8::decode(text, pos);
    const auto k = category(c);
    const bool letter = k == UTF8PROC_CATEGORY_LU || k == UTF8PROC_CATEGORY_LL || k == UTF8PROC_CATEGORY_LT ||
                        k == UTF8PROC_CATEGORY_LM || k == UTF8PROC_CATEGORY_LO;
    const bool digit = k == UTF8PROC_CATEGORY_ND;
    switch (what) {
      case CharClass::digit: if (!digit) return false; break;
      case CharClass::alpha: if (!letter) return false; break;
      case CharClass::alnum: if (!letter && !digit) return false; break;
      case CharClass::space: if (!is_space(c)) return false; break;
      case CharClass::lower:
        if (k == UTF8PROC_CATEGORY_LU || k == UTF8PROC_CATEGORY_LT) return false;
        any_cased = any_cased || k == UTF8PROC_CATEGORY_LL;
        break;
      case CharClass::upper:
        if (k == UTF8PROC_CATEGORY_LL || k == UTF8PROC_CATEGORY_LT) return false;
        any_cased = any_cased || k == UTF8PROC_CATEGORY_LU;
        break;
    }
  }
  return (what == CharClass::lower || what == CharClass::upper) ? any_cased : true;
}

std::optional<std::string> at(std::string_view text, int64_t index) {
  const int64_t n = length(text);
  if (index < 0) index += n;
  if (index < 0 || index >= n) return std::nullopt;
  const std::size_t begin = byte_offset(text, index);
  std::size_t end = begin;
  utf8::decode(text, end);
  return std::string(text.substr(begin, end - begin));
}

SliceBounds slice_indices(std::optional<int64_t> start, std::optional<int64_t> stop, std::optional<int64_t> step,
                          int64_t length) {
  SliceBounds b;
  b.step = step.value_or(1);
  HPCTRAIN_CHECK(b.step != 0, "slice step cannot be zero");
  const auto adjust = [&](std::optional<int64_t> value, bool is_start) {
    if (!value) return b.step < 0 ? (is_start ? length - 1 : -1) : (is_start ? 0 : length);
    int64_t v = *value;
    if (v < 0) {
      v += length;
      if (v < 0) v = b.step < 0 ? -1 : 0;
    } else if (v >= length) {
      v = b.step < 0 ? length - 1 : length;
    }
    return v;
  };
  b.start = adjust(start, true);
  b.stop = adjust(stop, false);
  return b;
}

std::vector<int64_t> slice_positions(const SliceBounds& b) {
  std::vector<int64_t> positions;
  if (b.step > 0)
    for (int64_t i = b.start; i < b.stop; i += b.step) positions.push_back(i);
  else
    for (int64_t i = b.start; i > b.stop; i += b.step) positions.push_back(i);
  return positions;
}

std::string slice(std::string_view text, const SliceBounds& bounds) {
  if (bounds.step == 1) {
    if (bounds.start >= bounds.stop) return "";
    const std::size_t begin = byte_offset(text, bounds.start);
    const std::size_t end = begin + byte_offset(text.substr(begin), bounds.stop - bounds.start);
    return std::string(text.substr(begin, end - begin));
  }
  const std::u32string code_points = decode(text);
  std::u32string out;
  for (const int64_t i : slice_positions(bounds)) out.push_back(code_points[static_cast<std::size_t>(i)]);
  return encode(out);
}

std::string html_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '\'': out += "&#39;"; break;
      case '"': out += "&#34;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string repr(std::string_view text) {
  const bool has_single = text.find('\'') != std::string_view::npos;
  const bool has_double = text.find('"') != std::string_view::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  std::size_t pos = 0;
  while (pos < text.size()) {
    const char32_t c = utf8::decode(text, pos);
    if (c == static_cast<char32_t>(quote) || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c < 0x20 || c == 0x7F) {
      out += fmt::format("\\x{:02x}", static_cast<uint32_t>(c));
    } else if (c < 0x7F || is_printable(c)) {
      utf8::append(out, c);
    } else if (c <= 0xFF) {
      out += fmt::format("\\x{:02x}", static_cast<uint32_t>(c));
    } else if (c <= 0xFFFF) {
      out += fmt::format("\\u{:04x}", static_cast<uint32_t>(c));
    } else {
      out += fmt::format("\\U{:08x}", static_cast<uint32_t>(c));
    }
  }
  out += quote;
  return out;
}

std::string float_repr(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value < 0 ? "-inf" : "inf";
  if (value == 0.0) return std::signbit(value) ? "-0.0" : "0.0";
  // The shortest round-trip digits, then CPython's layout of repr (format code 'r'): fixed notation when the
  // decimal point falls in [-4, 16), else exponent notation with at least two exponent digits.
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, value, std::chars_format::scientific);
  std::string_view text(buffer, static_cast<std::size_t>(result.ptr - buffer));
  std::string sign;
  if (text.front() == '-') {
    sign = "-";
    text.remove_prefix(1);
  }
  const std::size_t e = text.find('e');
  std::string digits(text.substr(0, e));
  digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
  const int exponent = std::atoi(std::string(text.substr(e + 1)).c_str());
  const int point = exponent + 1;  // digits[0:point] is the integer part
  std::string out = sign;
  if (point > -4 && point <= 16) {
    if (point <= 0) {
      out += "0." + std::string(static_cast<std::size_t>(-point), '0') + digits;
    } else if (static_cast<std::size_t>(point) >= digits.size()) {
      out += digits + std::string(static_cast<std::size_t>(point) - digits.size(), '0') + ".0";
    } else {
      out += digits.substr(0, static_cast<std::size_t>(point)) + "." + digits.substr(static_cast<std::size_t>(point));
    }
    return out;
  }
  out += digits.substr(0, 1);
  if (digits.size() > 1) out += "." + digits.substr(1);
  out += fmt::format("e{}{:02d}", exponent < 0 ? '-' : '+', std::abs(exponent));
  return out;
}

double round_float(double value, int64_t ndigits) {
  if (!std::isfinite(value) || ndigits > 323) return value;
  HPCTRAIN_CHECK(ndigits >= 0, "round() with negative precision {} is not supported", ndigits);
  const int size = std::snprintf(nullptr, 0, "%.*f", static_cast<int>(ndigits), value);
  std::string text(static_cast<std::size_t>(size) + 1, '\0');
  std::snprintf(text.data(), text.size(), "%.*f", static_cast<int>(ndigits), value);
  return std::strtod(text.c_str(), nullptr);
}

}  // namespace hpctrain::chat::py
