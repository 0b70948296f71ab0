// Added tokens (tokenizer.json "added_tokens") found in the text as Hugging Face tokenizers' AddedVocabulary
// does: leftmost-longest matches, first of the tokens with normalized=false in the raw text, then of those with
// normalized=true in each normalized piece between them. Tokens with lstrip, rstrip or single_word are refused
// at load (tokenizer.json reader), so a match is exactly the token's content.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace hpctrain::tokenize::detail {

struct AddedToken {
  std::string content;
  int32_t id = -1;
  bool special = false;
  bool normalized = false;  // matched in the normalized text (else in the raw text)
};

// A piece of the input: an added token (id >= 0) or normalized text to pre-tokenize (id < 0).
struct Segment {
  std::string text;
  int32_t id = -1;
};

class AddedTokens {
 public:
  AddedTokens() = default;
  explicit AddedTokens(std::vector<AddedToken> tokens);
  // Movable only: the groups point into tokens_, whose buffer a move keeps.
  AddedTokens(AddedTokens&&) noexcept = default;
  AddedTokens& operator=(AddedTokens&&) noexcept = default;
  AddedTokens(const AddedTokens&) = delete;
  AddedTokens& operator=(const AddedTokens&) = delete;

  // Splits text (valid UTF-8) into segments; normalize maps each raw piece between raw-matched tokens (identity
  // when the tokenizer has no normalizer). Empty pieces are dropped.
  void split(std::string_view text, const std::function<std::string(std::string_view)>& normalize,
             std::vector<Segment>& out) const;

  [[nodiscard]] const std::vector<AddedToken>& tokens() const { return tokens_; }
  [[nodiscard]] const AddedToken* find_id(int32_t id) const;
  [[nodiscard]] const AddedToken* find_content(std::string_view content) const;

 private:
  // Appends the pieces of text between matches of group (text, id -1) and the matches (content, id).
  static void split_group(std::string_view text, const std::vector<const AddedToken*>& group,
                          std::vector<Segment>& out);

  std::vector<AddedToken> tokens_;
  std::unordered_map<int32_t, size_t> index_of_id_;
  std::vector<const AddedToken*> raw_;         // normalized=false, longest first
  std::vector<const AddedToken*> normalized_;  // normalized=true, longest first
};

}  // namespace hpctrain::tokenize::detail
