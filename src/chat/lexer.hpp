// Private: Jinja's lexer as transformers configures it (trim_blocks and lstrip_blocks on, keep_trailing_newline
// off, default delimiters): template text → tokens, with every whitespace rule of jinja2/lexer.py (Note [Jinja
// whitespace]).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace hpctrain::chat {

enum class TokenType : uint8_t {
  data,            // template text (value: the text, whitespace control applied)
  variable_begin,  // {{
  variable_end,    // }}
  block_begin,     // {%
  block_end,       // %}
  name,
  string,          // value: the unescaped string
  integer,         // value: the digits (underscores removed)
  floating,        // value: the literal (underscores removed)
  op,              // value: the operator ("+", "==", "(", ...)
  eof,
};

struct Token {
  TokenType type = TokenType::eof;
  std::string value;
  int line = 1;
};

// Throws Error naming `name` and the line for what Jinja's lexer rejects (an unclosed comment or string, an
// unbalanced bracket, an invalid escape, a character no token starts with) and for text that is not UTF-8.
[[nodiscard]] std::vector<Token> lex(std::string_view source, const std::string& name);

}  // namespace hpctrain::chat
