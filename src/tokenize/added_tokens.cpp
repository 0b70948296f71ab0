// Added-token matching of Hugging Face tokenizers (AddedVocabulary::extract_and_normalize).
#include "tokenize/added_tokens.hpp"

#include <algorithm>

namespace hpctrain::tokenize::detail {
namespace {

// The longest token of group (sorted longest first) that text holds at pos; nullptr when none.
const AddedToken* longest_at(std::string_view text, size_t pos, const std::vector<const AddedToken*>& group) {
  for (const AddedToken* token : group) {
    if (text.compare(pos, token->content.size(), token->content) == 0) return token;
  }
  return nullptr;
}

}  // namespace

AddedTokens::AddedTokens(std::vector<AddedToken> tokens) : tokens_(std::move(tokens)) {
  for (const AddedToken& token : tokens_) {
    index_of_id_.emplace(token.id, size_t(&token - tokens_.data()));
    if (token.content.empty()) continue;  // matches nothing (the aho-corasick automaton never reports it)
    (token.normalized ? normalized_ : raw_).push_back(&token);
  }
  const auto longest_first = [](const AddedToken* a, const AddedToken* b) {
    return a->content.size() > b->content.size();
  };
  std::stable_sort(raw_.begin(), raw_.end(), longest_first);
  std::stable_sort(normalized_.begin(), normalized_.end(), longest_first);
}

void AddedTokens::split_group(std::string_view text, const std::vector<const AddedToken*>& group,
                              std::vector<Segment>& out) {
  size_t piece_start = 0;
  for (size_t pos = 0; pos < text.size() && !group.empty();) {
    const AddedToken* token = longest_at(text, pos, group);
    if (token == nullptr) {
      ++pos;
      continue;
    }
    if (pos > piece_start) out.push_back({std::string(text.substr(piece_start, pos - piece_start)), -1});
    out.push_back({token->content, token->id});
    pos += token->content.size();
    piece_start = pos;
  }
  if (piece_start < text.size()) out.push_back({std::string(text.substr(piece_start)), -1});
}

void AddedTokens::split(std::string_view text, const std::function<std::string(std::string_view)>& normalize,
                        std::vector<Segment>& out) const {
  std::vector<Segment> raw_pieces;
  split_group(text, raw_, raw_pieces);
  for (Segment& piece : raw_pieces) {
    if (piece.id >= 0) {
      out.push_back(std::move(piece));
      continue;
    }
    split_group(normalize(piece.text), normalized_, out);
  }
}

const AddedToken* AddedTokens::find_id(int32_t id) const {
  const auto it = index_of_id_.find(id);
  return it == index_of_id_.end() ? nullptr : &tokens_[it->second];
}

const AddedToken* AddedTokens::find_content(std::string_view content) const {
  const auto it =
      std::find_if(tokens_.begin(), tokens_.end(), [content](const AddedToken& t) { return t.content == content; });
  return it == tokens_.end() ? nullptr : &*it;
}

}  // namespace hpctrain::tokenize::detail

