// Vocab: WordPiece tokens and their ids (id = line number in vocab.txt), with the sha256 that identifies it.
#pragma once

#include "hpctrain/tokenize/token_table.hpp"

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace hpctrain::tokenize {

class Vocab {
 public:
  // Reads vocab.txt: one token per line ("\n" or "\r\n"), id = 0-based line number. Empty lines and duplicate
  // tokens are errors naming the file and line.
  static Vocab from_file(const std::filesystem::path& vocab_txt);
  // tokens[id]; origin names the source in error messages (e.g. "tokenizer.json: model.vocab").
  static Vocab from_tokens(std::vector<std::string> tokens, const std::string& origin);

  [[nodiscard]] size_t size() const { return tokens_.size(); }
  [[nodiscard]] std::optional<int32_t> find(std::string_view token) const;
  // The id of a token that must exist; throws hpctrain::Error naming the token otherwise.
  [[nodiscard]] int32_t id_of(std::string_view token) const;
  [[nodiscard]] const std::string& token(int32_t id) const;  // throws when id is out of range
  [[nodiscard]] const std::vector<std::string>& tokens() const { return tokens_; }

  // sha256 of the canonical vocab.txt text: every token followed by "\n", in id order. Equals the sha256 of a
  // vocab.txt file with "\n" line ends, so a vocab loaded from vocab.txt or tokenizer.json hashes the same.
  [[nodiscard]] const std::string& sha256() const { return sha256_; }

 private:
  Vocab() = default;
  static Vocab build(std::vector<std::string> tokens, const std::string& origin, std::string_view position);
  std::vector<std::string> tokens_;
  TokenTable table_;
  std::string sha256_;
};

}  // namespace hpctrain::tokenize
