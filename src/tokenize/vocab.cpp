// Vocab loading and validation.
#include "hpctrain/tokenize/vocab.hpp"

#include "hpctrain/core/error.hpp"
#include "hpctrain/core/sha256.hpp"
#include "hpctrain/tokenize/utf8.hpp"

#include <fstream>
#include <limits>
#include <sstream>

namespace hpctrain::tokenize {
namespace {

std::string read_file(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  HPCTRAIN_CHECK(in.good(), "{}: cannot open file for reading", file.string());
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return std::move(bytes).str();
}

std::vector<std::string> split_lines(const std::string& text, const std::filesystem::path& file) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(start, end - start);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    HPCTRAIN_CHECK(!line.empty(), "{}: line {}: empty token (expected one token per line)", file.string(),
                   lines.size() + 1);
    lines.push_back(std::move(line));
    start = end + 1;
  }
  return lines;
}

}  // namespace

Vocab Vocab::from_file(const std::filesystem::path& vocab_txt) {
  const std::string text = read_file(vocab_txt);
  HPCTRAIN_CHECK(utf8::is_valid(text), "{}: not valid UTF-8", vocab_txt.string());
  std::vector<std::string> lines = split_lines(text, vocab_txt);
  HPCTRAIN_CHECK(!lines.empty(), "{}: empty vocabulary (expected one token per line)", vocab_txt.string());
  return build(std::move(lines), vocab_txt.string(), "line");
}

Vocab Vocab::from_tokens(std::vector<std::string> tokens, const std::string& origin) {
  return build(std::move(tokens), origin, "id");
}

// position is "line" (1-based line numbers) or "id" (0-based ids) in error messages.
Vocab Vocab::build(std::vector<std::string> tokens, const std::string& origin, std::string_view position) {
  const size_t base = position == "line" ? 1 : 0;
  HPCTRAIN_CHECK(tokens.size() < size_t(std::numeric_limits<int32_t>::max()), "{}: {} tokens, more than int32 ids hold",
                 origin, tokens.size());
  Vocab vocab;
  Sha256 hasher;
  for (size_t id = 0; id < tokens.size(); ++id) {
    const std::string& token = tokens[id];
    HPCTRAIN_CHECK(!token.empty() && token.find('\n') == std::string::npos, "{}: {} {}: token is empty or has a newline",
                   origin, position, id + base);
    if (!vocab.table_.insert(token, int32_t(id))) {
      fail("{}: {} {}: duplicate token '{}' (first at {} {})", origin, position, id + base, token, position,
           vocab.table_.find(token) + base);
    }
    hasher.update(token);
    hasher.update("\n");
  }
  vocab.tokens_ = std::move(tokens);
  vocab.sha256_ = hasher.hex_digest();
  return vocab;
}

std::optional<int32_t> Vocab::find(std::string_view token) const {
  const int32_t id = table_.find(token);
  if (id == TokenTable::kNotFound) return std::nullopt;
  return id;
}

int32_t Vocab::id_of(std::string_view token) const {
  const int32_t id = table_.find(token);
  HPCTRAIN_CHECK(id != TokenTable::kNotFound, "token '{}' is not in the vocabulary ({} tokens)", token, size());
  return id;
}

const std::string& Vocab::token(int32_t id) const {
  HPCTRAIN_CHECK(id >= 0 && size_t(id) < tokens_.size(), "token id {} out of range [0, {})", id, tokens_.size());
  return tokens_[size_t(id)];
}

}  // namespace hpctrain::tokenize
