// Jinja's lexer (lexer.hpp), rule for rule as jinja2/lexer.py with transformers' environment.
//
// Note [Jinja whitespace]
// transformers compiles chat templates with trim_blocks=True, lstrip_blocks=True (and Jinja's default
// keep_trailing_newline=False), so the text between tags changes as Jinja's lexer changes it:
// - newlines: \r\n and \r read as \n everywhere; one newline at the very end of the template is dropped;
// - `{%-`, `{{-`, `{#-`: the text before the tag loses its trailing whitespace (Python's str.rstrip());
// - `-%}`, `-}}`, `-#}`: the whitespace after the tag is dropped (Python's \s*);
// - trim_blocks: `%}` and `#}` (without `+`) eat one newline right after them;
// - lstrip_blocks: before `{%` and `{#` (not `{{`, and not with `+`), spaces and tabs from the start of the line
//   are dropped when nothing else is on the line before the tag ("start of line": after a newline in the text,
//   or at the start of the text when the previous tag's match ended with a newline, or at the template's start).
// Whitespace is Python's (str.isspace: Unicode spaces too). Tests: tests/chat/ (goldens from jinja2 itself).
#include "chat/lexer.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "chat/pystr.hpp"
#include "hpctrain/core/error.hpp"
#include "hpctrain/tokenize/utf8.hpp"

namespace hpctrain::chat {
namespace {

namespace utf8 = tokenize::utf8;

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_name_char(char c) { return is_name_start(c) || is_digit(c); }
bool is_hex(char c) { return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

// Length of the Python whitespace code point at text[pos], or 0.
std::size_t space_length(std::string_view text, std::size_t pos) {
  if (pos >= text.size()) return 0;
  std::size_t end = pos;
  return py::is_space(utf8::decode(text, end)) ? end - pos : 0;
}

std::size_t skip_spaces(std::string_view text, std::size_t pos) {
  while (std::size_t n = space_length(text, pos)) pos += n;
  return pos;
}

// Python's text.rstrip(): the length of text without its trailing whitespace.
std::size_t rstrip_length(std::string_view text) {
  std::size_t pos = 0, kept = 0;
  while (pos < text.size()) {
    const std::size_t n = space_length(text, pos);
    if (n > 0) {
      pos += n;
    } else {
      utf8::decode(text, pos);
      kept = pos;
    }
  }
  return kept;
}

bool all_spaces(std::string_view text) { return !text.empty() && skip_spaces(text, 0) == text.size(); }

// \r\n and \r as \n; one trailing newline dropped (keep_trailing_newline=False).
std::string normalize_newlines(std::string_view source) {
  std::string out;
  out.reserve(source.size());
  for (std::size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out += source[i];
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

int count_newlines(std::string_view text) {
  int n = 0;
  for (const char c : text) n += c == '\n' ? 1 : 0;
  return n;
}

class Lexer {
 public:
  Lexer(std::string source, const std::string& name) : source_(std::move(source)), name_(name) {}

  std::vector<Token> run() {
    while (pos_ < source_.size()) root();
    tokens_.push_back({TokenType::eof, "", line_});
    return std::move(tokens_);
  }

 private:
  template <typename... Args>
  [[noreturn]] void error(fmt::format_string<Args...> format, Args&&... args) {
    fail("{} line {}: {}", name_, line_, fmt::format(format, std::forward<Args>(args)...));
  }

  bool starts_with(std::size_t at, const char* text) const {
    return source_.compare(at, std::strlen(text), text) == 0;
  }

  void advance_to(std::size_t end) {
    line_ += count_newlines(std::string_view(source_).substr(pos_, end - pos_));
    pos_ = end;
  }

  void emit(TokenType type, std::string value, int line) {
    if (type == TokenType::data && value.empty()) return;
    tokens_.push_back({type, std::move(value), line});
  }

  // The text before a tag, with `-` stripping or lstrip_blocks applied (Note [Jinja whitespace]).
  void emit_text(std::string_view text, char sign, bool lstrip_allowed, bool line_starting) {
    std::size_t keep = text.size();
    if (sign == '-') {
      keep = rstrip_length(text);
    } else if (sign != '+' && lstrip_allowed) {
      const std::size_t newline = text.rfind('\n');
      const std::size_t line_start = newline == std::string_view::npos ? 0 : newline + 1;
      if ((line_start > 0 || line_starting) && all_spaces(text.substr(line_start))) keep = line_start;
    }
    emit(TokenType::data, std::string(text.substr(0, keep)), line_);
  }

  // The block end at pos_ (`+%}`, `-%}` + whitespace, `%}` + one newline), or 0.
  std::size_t block_end_length(std::size_t at) const {
    if (starts_with(at, "+%}")) return 3;
    if (starts_with(at, "-%}")) return skip_spaces(source_, at + 3) - at;
    if (starts_with(at, "%}")) return at + 2 < source_.size() && source_[at + 2] == '\n' ? 3 : 2;
    return 0;
  }

  std::size_t variable_end_length(std::size_t at) const {
    if (starts_with(at, "-}}")) return skip_spaces(source_, at + 3) - at;
    if (starts_with(at, "}}")) return 2;
    return 0;
  }

  // The raw-begin tag at `at` ({% raw %} with optional -/+ and -%}), or 0.
  std::size_t raw_begin_length(std::size_t at) const {
    std::size_t p = at + 2;
    if (p < source_.size() && (source_[p] == '-' || source_[p] == '+')) ++p;
    p = skip_spaces(source_, p);
    if (!starts_with(p, "raw")) return 0;
    p = skip_spaces(source_, p + 3);
    if (starts_with(p, "-%}")) return skip_spaces(source_, p + 3) - at;
    if (starts_with(p, "%}")) return p + 2 - at;
    return 0;
  }

  void root() {
    const bool line_starting = pos_ == 0 || source_[pos_ - 1] == '\n';
    std::size_t tag = pos_;
    while (tag + 1 < source_.size() &&
           !(source_[tag] == '{' && (source_[tag + 1] == '{' || source_[tag + 1] == '%' || source_[tag + 1] == '#')))
      ++tag;
    if (tag + 1 >= source_.size()) {
      emit(TokenType::data, source_.substr(pos_), line_);
      advance_to(source_.size());
      return;
    }
    const char kind = source_[tag + 1];
    const std::string_view text = std::string_view(source_).substr(pos_, tag - pos_);
    if (kind == '%') {
      if (const std::size_t raw = raw_begin_length(tag)) {
        const char sign = source_[tag + 2] == '-' || source_[tag + 2] == '+' ? source_[tag + 2] : '\0';
        emit_text(text, sign, true, line_starting);
        advance_to(tag + raw);
        raw_body();
        return;
      }
    }
    const char sign = tag + 2 < source_.size() && (source_[tag + 2] == '-' || source_[tag + 2] == '+') ? source_[tag + 2] : '\0';
    emit_text(text, sign, kind != '{', line_starting);
    advance_to(tag + 2 + (sign ? 1 : 0));
    if (kind == '#') return comment();
    const int line = line_;
    emit(kind == '%' ? TokenType::block_begin : TokenType::variable_begin, "", line);
    tag_body(kind == '%');
  }

  void comment() {
    for (std::size_t at = pos_; at < source_.size(); ++at) {
      std::size_t end = 0;
      if (starts_with(at, "+#}")) end = at + 3;
      else if (starts_with(at, "-#}")) end = skip_spaces(source_, at + 3);
      else if (starts_with(at, "#}")) end = at + 2 < source_.size() && source_[at + 2] == '\n' ? at + 3 : at + 2;
      if (end == 0) continue;
      advance_to(end);
      return;
    }
    error("missing end of comment tag");
  }

  void raw_body() {
    const bool line_starting = pos_ == 0 || source_[pos_ - 1] == '\n';
    for (std::size_t at = pos_; at + 1 < source_.size(); ++at) {
      if (!starts_with(at, "{%")) continue;
      std::size_t p = at + 2;
      const char sign = p < source_.size() && (source_[p] == '-' || source_[p] == '+') ? source_[p] : '\0';
      if (sign) ++p;
      p = skip_spaces(source_, p);
      if (!starts_with(p, "endraw")) continue;
      p = skip_spaces(source_, p + 6);
      const std::size_t end = block_end_length(p);
      if (end == 0) continue;
      emit_text(std::string_view(source_).substr(pos_, at - pos_), sign, true, line_starting);
      advance_to(p + end);
      return;
    }
    error("missing end of raw directive");
  }

  // Tokens inside {% %} or {{ }} up to the end delimiter (ends are not matched while brackets are open).
  void tag_body(bool block) {
    std::vector<char> brackets;
    while (true) {
      if (pos_ >= source_.size()) error("unexpected end of template inside a {} tag", block ? "{% %}" : "{{ }}");
      if (brackets.empty()) {
        if (const std::size_t end = block ? block_end_length(pos_) : variable_end_length(pos_)) {
          emit(block ? TokenType::block_end : TokenType::variable_end, "", line_);
          advance_to(pos_ + end);
          return;
        }
      }
      if (const std::size_t spaces = skip_spaces(source_, pos_) - pos_) {
        advance_to(pos_ + spaces);
        continue;
      }
      if (lex_number() || lex_name() || lex_string()) continue;
      lex_operator(brackets);
    }
  }

  // (\d+_)*\d+ at `at`: its end, or `at` when there is none.
  std::size_t digits_end(std::size_t at) const {
    std::size_t p = at;
    while (p < source_.size() && is_digit(source_[p])) {
      while (p < source_.size() && is_digit(source_[p])) ++p;
      if (p + 1 < source_.size() && source_[p] == '_' && is_digit(source_[p + 1])) ++p;
    }
    return p;
  }

  bool lex_number() {
    if (!is_digit(source_[pos_])) return false;
    const std::size_t whole = digits_end(pos_);
    // float_re: an exponent (after optional fraction digits) or a fraction, not right after a '.'.
    if (pos_ == 0 || source_[pos_ - 1] != '.') {
      std::size_t p = whole;
      bool fraction = false;
      if (p + 1 < source_.size() && source_[p] == '.' && is_digit(source_[p + 1])) {
        p = digits_end(p + 1);
        fraction = true;
      }
      std::size_t exponent = 0;
      if (p < source_.size() && (source_[p] == 'e' || source_[p] == 'E')) {
        std::size_t q = p + 1;
        if (q < source_.size() && (source_[q] == '+' || source_[q] == '-')) ++q;
        if (q < source_.size() && is_digit(source_[q])) exponent = digits_end(q);
      }
      if (exponent > 0 || fraction) {
        const std::size_t end = exponent > 0 ? exponent : p;
        std::string literal = source_.substr(pos_, end - pos_);
        literal.erase(std::remove(literal.begin(), literal.end(), '_'), literal.end());
        emit(TokenType::floating, literal, line_);
        advance_to(end);
        return true;
      }
    }
    // integer_re: 0b / 0o / 0x, a decimal without a leading zero, or zeros.
    std::size_t end = pos_ + 1;
    const char prefix = pos_ + 1 < source_.size() ? static_cast<char>(source_[pos_ + 1] | 0x20) : '\0';
    if (source_[pos_] == '0' && (prefix == 'b' || prefix == 'o' || prefix == 'x')) {
      error("unsupported construct: binary, octal and hexadecimal literals");
    } else if (source_[pos_] == '0') {
      while (end < source_.size() && (source_[end] == '0' || (source_[end] == '_' && end + 1 < source_.size() && source_[end + 1] == '0')))
        ++end;
    } else {
      end = whole;
    }
    std::string literal = source_.substr(pos_, end - pos_);
    literal.erase(std::remove(literal.begin(), literal.end(), '_'), literal.end());
    emit(TokenType::integer, literal, line_);
    advance_to(end);
    return true;
  }

  bool lex_name() {
    if (!is_name_start(source_[pos_])) {
      if (static_cast<unsigned char>(source_[pos_]) >= 0x80 && space_length(source_, pos_) == 0)
        error("unsupported construct: a name with non-ASCII characters");
      return false;
    }
    std::size_t end = pos_;
    while (end < source_.size() && is_name_char(source_[end])) ++end;
    emit(TokenType::name, source_.substr(pos_, end - pos_), line_);
    advance_to(end);
    return true;
  }

  bool lex_string() {
    const char quote = source_[pos_];
    if (quote != '\'' && quote != '"') return false;
    std::size_t end = pos_ + 1;
    while (end < source_.size() && source_[end] != quote) end += source_[end] == '\\' ? 2 : 1;
    if (end >= source_.size()) error("unexpected char {} (an unclosed string)", py::repr(std::string(1, quote)));
    const int line = line_;
    emit(TokenType::string, unescape(std::string_view(source_).substr(pos_ + 1, end - pos_ - 1)), line);
    advance_to(end + 1);
    return true;
  }

  // Python's unicode-escape decoding of a string literal's body (as Jinja decodes it).
  std::string unescape(std::string_view body) {
    std::string out;
    for (std::size_t i = 0; i < body.size(); ++i) {
      if (body[i] != '\\') {
        out += body[i];
        continue;
      }
      const char c = body[++i];
      switch (c) {
        case '\n': break;
        case '\\': out += '\\'; break;
        case '\'': out += '\''; break;
        case '"': out += '"'; break;
        case 'a': out += '\a'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'v': out += '\v'; break;
        case 'x': case 'u': case 'U': {
          const std::size_t digits = c == 'x' ? 2 : (c == 'u' ? 4 : 8);
          uint32_t cp = 0;
          for (std::size_t k = 1; k <= digits; ++k) {
            if (i + k >= body.size() || !is_hex(body[i + k])) error("truncated \\{}{} escape in a string", c, std::string(digits, 'X'));
            const char h = body[i + k];
            cp = cp * 16 + static_cast<uint32_t>(is_digit(h) ? h - '0' : (h | 0x20) - 'a' + 10);
          }
          i += digits;
          if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) error("the escape \\{} gives U+{:X}, which is not a character UTF-8 can hold", c, cp);
          utf8::append(out, cp);
          break;
        }
        default:
          if (c >= '0' && c <= '7') {
            uint32_t cp = static_cast<uint32_t>(c - '0');
            for (int k = 0; k < 2 && i + 1 < body.size() && body[i + 1] >= '0' && body[i + 1] <= '7'; ++k)
              cp = cp * 8 + static_cast<uint32_t>(body[++i] - '0');
            utf8::append(out, cp);
          } else if (c == 'N') {
            error("unsupported construct: \\N{{...}} escapes");
          } else if (static_cast<unsigned char>(c) >= 0x80) {
            error("unsupported construct: a backslash before a non-ASCII character");
          } else {
            out += '\\';
            out += c;
          }
      }
    }
    return out;
  }

  void lex_operator(std::vector<char>& brackets) {
    static const char* const kOperators[] = {"//", "**", "==", "!=", ">=", "<=", "+", "-", "/", "*", "%", "~", "[",
                                             "]",  "(",  ")",  "{",  "}",  "=",  ".", ":", "|", ",", ";", ">", "<"};
    for (const char* op : kOperators) {
      if (!starts_with(pos_, op)) continue;
      const char c = op[0];
      if (op[1] == '\0' && (c == '(' || c == '[' || c == '{')) brackets.push_back(c == '(' ? ')' : (c == '[' ? ']' : '}'));
      if (op[1] == '\0' && (c == ')' || c == ']' || c == '}')) {
        if (brackets.empty()) error("unexpected '{}'", c);
        if (brackets.back() != c) error("unexpected '{}', expected '{}'", c, brackets.back());
        brackets.pop_back();
      }
      emit(TokenType::op, op, line_);
      advance_to(pos_ + std::strlen(op));
      return;
    }
    std::size_t end = pos_;
    const char32_t c = utf8::decode(source_, end);
    std::string text;
    utf8::append(text, c);
    error("unexpected char {}", py::repr(text));
  }

  std::string source_;
  const std::string& name_;
  std::size_t pos_ = 0;
  int line_ = 1;
  std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> lex(std::string_view source, const std::string& name) {
  if (!utf8::is_valid(source)) fail("{}: the template is not valid UTF-8", name);
  return Lexer(normalize_newlines(source), name).run();
}

}  // namespace hpctrain::chat
