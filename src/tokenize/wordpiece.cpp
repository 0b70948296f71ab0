// WordPiece as in Hugging Face tokenizers (models/wordpiece): same greedy search, without building
// "##"-prefixed strings (continuations live in their own table) and without trying pieces longer than any token.
#include "hpctrain/tokenize/wordpiece.hpp"

#include "hpctrain/core/error.hpp"
#include "hpctrain/tokenize/utf8.hpp"

namespace hpctrain::tokenize {
namespace {

bool is_continuation_byte(char byte) { return (static_cast<unsigned char>(byte) & 0xC0) == 0x80; }

}  // namespace

WordPiece::WordPiece(const Vocab& vocab, WordPieceOptions options) : options_(std::move(options)) {
  const std::string& prefix = options_.continuing_subword_prefix;
  for (size_t id = 0; id < vocab.size(); ++id) {
    const std::string& token = vocab.tokens()[id];
    word_starts_.insert(token, int32_t(id));
    // A token equal to the prefix would be a continuation with an empty remainder, which never matches.
    if (token.size() > prefix.size() && token.compare(0, prefix.size(), prefix) == 0) {
      continuations_.insert(std::string_view(token).substr(prefix.size()), int32_t(id));
    }
  }
  const auto unk = vocab.find(options_.unk_token);
  HPCTRAIN_CHECK(unk.has_value(), "WordPiece: unk_token '{}' is not in the vocabulary ({} tokens)", options_.unk_token,
                 vocab.size());
  unk_id_ = *unk;
}

size_t WordPiece::longest_piece(std::string_view word, size_t start, const TokenTable& table, int32_t& id) const {
  size_t end = std::min(word.size(), start + table.max_token_bytes());
  while (end < word.size() && is_continuation_byte(word[end])) --end;  // back to a character boundary
  for (; end > start;) {
    id = table.find(word.substr(start, end - start));
    if (id != TokenTable::kNotFound) return end;
    do --end;
    while (end > start && is_continuation_byte(word[end]));
  }
  return start;
}

void WordPiece::tokenize(std::string_view word, std::vector<int32_t>& ids) const {
  if (word.size() > size_t(options_.max_input_chars_per_word) &&
      utf8::count_scalars(word) > size_t(options_.max_input_chars_per_word)) {
    ids.push_back(unk_id_);
    return;
  }
  const size_t first_piece = ids.size();
  for (size_t start = 0; start < word.size();) {
    int32_t id = TokenTable::kNotFound;
    const size_t end = longest_piece(word, start, start == 0 ? word_starts_ : continuations_, id);
    if (end == start) {  // no piece matches here: the whole word is unknown
      ids.resize(first_piece);
      ids.push_back(unk_id_);
      return;
    }
    ids.push_back(id);
    start = end;
  }
}

}  // namespace hpctrain::tokenize
