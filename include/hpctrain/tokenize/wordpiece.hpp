// WordPiece: greedy longest-match-first split of one pre-tokenized word into vocabulary pieces.
#pragma once

#include "hpctrain/tokenize/token_table.hpp"
#include "hpctrain/tokenize/vocab.hpp"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace hpctrain::tokenize {

struct WordPieceOptions {
  std::string unk_token = "[UNK]";
  std::string continuing_subword_prefix = "##";
  int max_input_chars_per_word = 100;  // longer words (in Unicode scalar values) become unk_token
};

class WordPiece {
 public:
  // Throws hpctrain::Error when unk_token is not in vocab.
  WordPiece(const Vocab& vocab, WordPieceOptions options);

  // Appends the ids of word's pieces to ids; a word with a position no piece matches, or longer than
  // max_input_chars_per_word, becomes the single unk id. word must be valid UTF-8.
  void tokenize(std::string_view word, std::vector<int32_t>& ids) const;

  [[nodiscard]] int32_t unk_id() const { return unk_id_; }
  [[nodiscard]] const WordPieceOptions& options() const { return options_; }

 private:
  // Longest piece of word starting at start that table knows; returns its end (start when none).
  [[nodiscard]] size_t longest_piece(std::string_view word, size_t start, const TokenTable& table,
                                     int32_t& id) const;

  WordPieceOptions options_;
  TokenTable word_starts_;     // tokens without the prefix
  TokenTable continuations_;   // tokens that had the prefix, stored without it
  int32_t unk_id_ = -1;
};

}  // namespace hpctrain::tokenize
