// Flat JSON object scanner (see Note [Flat JSON fast path]): RFC 8259 strings, numbers and literals, validating
// UTF-8 like nlohmann does (RFC 3629 ranges: no overlongs, no surrogates, nothing above U+10FFFF).
#include "flat_json.hpp"

#include <array>
#include <cstdint>

namespace hpctrain::data::detail {
namespace {

// Bytes that can be copied as they are inside a string: printable ASCII except '"' and '\\'.
constexpr std::array<bool, 256> make_plain_table() {
  std::array<bool, 256> table{};
  for (int c = 0x20; c < 0x80; ++c) table[c] = c != '"' && c != '\\';
  return table;
}
constexpr std::array<bool, 256> kPlain = make_plain_table();

// Length of the valid UTF-8 sequence starting at p (lead byte >= 0x80), or 0 if it is invalid.
int utf8_sequence_length(const unsigned char* p, const unsigned char* end) {
  auto in = [](unsigned char c, unsigned char low, unsigned char high) { return c >= low && c <= high; };
  const unsigned char lead = p[0];
  const auto left = end - p;
  if (lead < 0xC2) return 0;  // continuation byte or overlong 2-byte lead
  if (lead < 0xE0) return left >= 2 && in(p[1], 0x80, 0xBF) ? 2 : 0;
  if (lead < 0xF0) {
    const unsigned char low = lead == 0xE0 ? 0xA0 : 0x80;   // E0: no overlongs
    const unsigned char high = lead == 0xED ? 0x9F : 0xBF;  // ED: no UTF-16 surrogates
    return left >= 3 && in(p[1], low, high) && in(p[2], 0x80, 0xBF) ? 3 : 0;
  }
  if (lead < 0xF5) {
    const unsigned char low = lead == 0xF0 ? 0x90 : 0x80;   // F0: no overlongs
    const unsigned char high = lead == 0xF4 ? 0x8F : 0xBF;  // F4: nothing above U+10FFFF
    return left >= 4 && in(p[1], low, high) && in(p[2], 0x80, 0xBF) && in(p[3], 0x80, 0xBF) ? 4 : 0;
  }
  return 0;
}

// Length of the maximal subpart of the ill-formed sequence at p (Unicode's "substitution of maximal subparts",
// as Python's errors="replace"): the lead byte and the continuation bytes a valid sequence could go on with.
int invalid_subpart_length(const unsigned char* p, const unsigned char* end) {
  const unsigned char lead = p[0];
  int continuations = 0;
  unsigned char low = 0x80, high = 0xBF;
  if (lead >= 0xC2 && lead < 0xE0) {
    continuations = 1;
  } else if (lead >= 0xE0 && lead < 0xF0) {
    continuations = 2, low = lead == 0xE0 ? 0xA0 : 0x80, high = lead == 0xED ? 0x9F : 0xBF;
  } else if (lead >= 0xF0 && lead < 0xF5) {
    continuations = 3, low = lead == 0xF0 ? 0x90 : 0x80, high = lead == 0xF4 ? 0x8F : 0xBF;
  }
  int length = 1;
  while (length <= continuations && p + length < end && p[length] >= low && p[length] <= high) {
    ++length, low = 0x80, high = 0xBF;
  }
  return length;
}

void append_utf8(std::string& out, std::uint32_t code_point) {
  if (code_point < 0x80) {
    out.push_back(static_cast<char>(code_point));
  } else if (code_point < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (code_point >> 6)));
    out.push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
  } else if (code_point < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (code_point >> 12)));
    out.push_back(static_cast<char>(0x80 | ((code_point >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (code_point >> 18)));
    out.push_back(static_cast<char>(0x80 | ((code_point >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((code_point >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
  }
}

class FlatObjectScanner {
 public:
  explicit FlatObjectScanner(std::string_view line)
      : p_(reinterpret_cast<const unsigned char*>(line.data())), end_(p_ + line.size()) {}

  bool object(const std::vector<std::string>& field_names, std::vector<std::optional<std::string>>& fields) {
    skip_whitespace();
    if (!consume('{')) return false;
    skip_whitespace();
    if (!consume('}')) {
      do {
        skip_whitespace();
        key_.clear();
        if (!string(&key_)) return false;
        skip_whitespace();
        if (!consume(':')) return false;
        skip_whitespace();
        if (!value(slot_of(key_, field_names), fields)) return false;
        skip_whitespace();
      } while (consume(','));
      if (!consume('}')) return false;
    }
    skip_whitespace();
    return p_ == end_;  // nothing may follow the object
  }

 private:
  static int slot_of(const std::string& key, const std::vector<std::string>& field_names) {
    for (std::size_t i = 0; i < field_names.size(); ++i) {
      if (field_names[i] == key) return static_cast<int>(i);
    }
    return -1;
  }

  void skip_whitespace() {
    while (p_ < end_ && (*p_ == ' ' || *p_ == '\t' || *p_ == '\n' || *p_ == '\r')) ++p_;
  }

  bool consume(char c) {
    if (p_ == end_ || *p_ != static_cast<unsigned char>(c)) return false;
    ++p_;
    return true;
  }

  // A value; stored in fields[slot] when slot >= 0 (a duplicate key overwrites, as in nlohmann).
  bool value(int slot, std::vector<std::optional<std::string>>& fields) {
    std::optional<std::string>* field = slot >= 0 ? &fields[static_cast<std::size_t>(slot)] : nullptr;
    if (p_ == end_) return false;
    switch (*p_) {
      case '"': {
        std::string* out = nullptr;
        if (field != nullptr) {
          out = &field->emplace();
        }
        return string(out);
      }
      case 't': return literal("true", field);
      case 'f': return literal("false", field);
      case 'n':
        if (field != nullptr) field->reset();
        return literal("null", nullptr);
      default: return number(field);  // '{' and '[' fail here too: nested values take the nlohmann path
    }
  }

  bool literal(std::string_view word, std::optional<std::string>* field) {
    if (static_cast<std::size_t>(end_ - p_) < word.size() ||
        std::string_view(reinterpret_cast<const char*>(p_), word.size()) != word) {
      return false;
    }
    p_ += word.size();
    if (field != nullptr) field->emplace(word);
    return true;
  }

  // JSON number grammar. Long numbers and 3-digit exponents are left to nlohmann, which rejects those that
  // overflow a double; up to 24 characters with |exponent| < 100 always fit.
  bool number(std::optional<std::string>* field) {
    const unsigned char* start = p_;
    auto digits = [&] {
      const unsigned char* first = p_;
      while (p_ < end_ && *p_ >= '0' && *p_ <= '9') ++p_;
      return p_ - first;
    };
    consume('-');
    if (p_ == end_) return false;
    if (*p_ == '0') {
      ++p_;
    } else if (digits() == 0) {
      return false;
    }
    bool is_integer = true;
    if (consume('.')) {
      is_integer = false;
      if (digits() == 0) return false;
    }
    if (consume('e') || consume('E')) {
      is_integer = false;
      if (!consume('+')) consume('-');
      const auto exponent_digits = digits();
      if (exponent_digits == 0 || exponent_digits > 2) return false;
    }
    if (p_ - start > 24) return false;
    if (field != nullptr) {
      const std::string_view text(reinterpret_cast<const char*>(start), static_cast<std::size_t>(p_ - start));
      // nlohmann parses -0 as the integer 0; any other integer's decimal rendering is its text.
      field->emplace(is_integer && text == "-0" ? std::string_view("0") : text);
    }
    return true;
  }

  // A string at p_ (which must be '"'); its unescaped text is appended to *out when out is not null.
  bool string(std::string* out) {
    if (!consume('"')) return false;
    for (;;) {
      const unsigned char* run = p_;
      while (p_ < end_ && kPlain[*p_]) ++p_;
      if (out != nullptr) out->append(reinterpret_cast<const char*>(run), static_cast<std::size_t>(p_ - run));
      if (p_ == end_) return false;
      const unsigned char c = *p_;
      if (c == '"') {
        ++p_;
        return true;
      }
      if (c == '\\') {
        if (!escape(out)) return false;
        continue;
      }
      if (c < 0x20) return false;  // control characters must be escaped
      const int length = utf8_sequence_length(p_, end_);
      if (length == 0) return false;
      if (out != nullptr) out->append(reinterpret_cast<const char*>(p_), static_cast<std::size_t>(length));
      p_ += length;
    }
  }

  bool escape(std::string* out) {
    ++p_;  // the backslash
    if (p_ == end_) return false;
    const unsigned char c = *p_++;
    char decoded = 0;
    switch (c) {
      case '"': decoded = '"'; break;
      case '\\': decoded = '\\'; break;
      case '/': decoded = '/'; break;
      case 'b': decoded = '\b'; break;
      case 'f': decoded = '\f'; break;
      case 'n': decoded = '\n'; break;
      case 'r': decoded = '\r'; break;
      case 't': decoded = '\t'; break;
      case 'u': return unicode_escape(out);
      default: return false;
    }
    if (out != nullptr) out->push_back(decoded);
    return true;
  }

  bool hex4(std::uint32_t& value) {
    if (end_ - p_ < 4) return false;
    value = 0;
    for (int i = 0; i < 4; ++i) {
      const unsigned char c = *p_++;
      std::uint32_t digit = 0;
      if (c >= '0' && c <= '9') {
        digit = c - '0';
      } else if (c >= 'a' && c <= 'f') {
        digit = c - 'a' + 10;
      } else if (c >= 'A' && c <= 'F') {
        digit = c - 'A' + 10;
      } else {
        return false;
      }
      value = value * 16 + digit;
    }
    return true;
  }

  // After "\u": four hex digits; a high surrogate must be followed by "\u" and a low surrogate.
  bool unicode_escape(std::string* out) {
    std::uint32_t code_point = 0;
    if (!hex4(code_point)) return false;
    if (code_point >= 0xDC00 && code_point <= 0xDFFF) return false;  // lone low surrogate
    if (code_point >= 0xD800 && code_point <= 0xDBFF) {
      std::uint32_t low = 0;
      if (!consume('\\') || !consume('u') || !hex4(low) || low < 0xDC00 || low > 0xDFFF) return false;
      code_point = 0x10000 + ((code_point - 0xD800) << 10) + (low - 0xDC00);
    }
    if (out != nullptr) append_utf8(*out, code_point);
    return true;
  }

  const unsigned char* p_;
  const unsigned char* end_;
  std::string key_;
};

}  // namespace

bool replace_invalid_utf8(std::string_view text, std::string& out) {
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  const auto* end = p + text.size();
  bool replaced = false;
  out.clear();
  while (p < end) {
    const int valid = *p < 0x80 ? 1 : utf8_sequence_length(p, end);
    if (valid > 0) {
      out.append(reinterpret_cast<const char*>(p), static_cast<std::size_t>(valid));
      p += valid;
      continue;
    }
    append_utf8(out, 0xFFFD);
    p += invalid_subpart_length(p, end);
    replaced = true;
  }
  return replaced;
}

bool parse_flat_object(std::string_view line, const std::vector<std::string>& field_names,
                       std::vector<std::optional<std::string>>& fields) {
  fields.resize(field_names.size());
  for (auto& field : fields) field.reset();
  FlatObjectScanner scanner(line);
  return scanner.object(field_names, fields);
}

}  // namespace hpctrain::data::detail
