// BPE as in Hugging Face tokenizers (models/bpe/model.rs merge_word, word.rs merge_all).
#include "tokenize/bpe.hpp"

#include "hpctrain/core/error.hpp"
#include "hpctrain/tokenize/utf8.hpp"

#include <queue>

namespace hpctrain::tokenize::detail {
namespace {

// A symbol of the word being merged; merged-away symbols keep length 0 (tokenizers' Symbol).
struct Symbol {
  int32_t id;
  int64_t prev, next;
  uint32_t length;  // bytes (0: merged into its left neighbour)
};

// A candidate merge of the symbol at pos with its right neighbour; popped lowest rank first, then leftmost.
struct Candidate {
  uint32_t rank;
  size_t pos;
  int32_t new_id;
  bool operator>(const Candidate& other) const {
    return rank != other.rank ? rank > other.rank : pos > other.pos;
  }
};

size_t char_length(std::string_view word, size_t pos) {
  size_t end = pos;
  (void)utf8::decode(word, end);
  return end - pos;
}

}  // namespace

Bpe::Bpe(Vocab vocab, const std::vector<std::pair<std::string, std::string>>& merges, BpeOptions options,
         const std::string& origin)
    : vocab_(std::move(vocab)), options_(std::move(options)) {
  merges_.reserve(merges.size());
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const auto& [left, right] = merges[rank];
    const auto left_id = vocab_.find(left), right_id = vocab_.find(right), new_id = vocab_.find(left + right);
    for (const auto& [token, id] : {std::pair{left, left_id}, {right, right_id}, {left + right, new_id}}) {
      HPCTRAIN_CHECK(id.has_value(), "{}[{}]: expected tokens of model.vocab, got \"{}\" (not in the vocabulary)",
                     origin, rank, token);
    }
    merges_.insert_or_assign(pair_key(*left_id, *right_id), Merge{uint32_t(rank), *new_id});
  }
  if (options_.unk_token) unk_id_ = vocab_.id_of(*options_.unk_token);
}

Bpe::Bpe(Bpe&& other) noexcept
    : vocab_(std::move(other.vocab_)), merges_(std::move(other.merges_)), options_(std::move(other.options_)),
      unk_id_(other.unk_id_), cache_(std::move(other.cache_)) {}

const Bpe::Merge* Bpe::find_merge(int32_t left, int32_t right) const {
  const auto it = merges_.find(pair_key(left, right));
  return it == merges_.end() ? nullptr : &it->second;
}

void Bpe::tokenize(std::string_view word, std::vector<int32_t>& ids) const {
  if (word.empty()) return;
  if (options_.ignore_merges) {
    if (const auto id = vocab_.find(word)) return ids.push_back(*id);
  }
  const bool cacheable = word.size() <= kMaxCachedWordBytes;
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    const auto it = cache_.find(std::string(word));
    if (it != cache_.end()) {
      ids.insert(ids.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  const size_t first = ids.size();
  merge_word(word, ids);
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    if (cache_.size() < kCacheCapacity) cache_.emplace(std::string(word), std::vector<int32_t>(ids.begin() + first, ids.end()));
  }
}

// One symbol per character; characters outside the vocabulary become unk (fused when fuse_unk) or are dropped
// when there is no unk token, as tokenizers' merge_word.
void Bpe::initial_symbols(std::string_view word, std::vector<int32_t>& ids, std::vector<uint32_t>& lengths) const {
  std::optional<std::pair<int32_t, uint32_t>> pending_unk;
  for (size_t pos = 0; pos < word.size();) {
    const auto length = uint32_t(char_length(word, pos));
    const auto id = vocab_.find(word.substr(pos, length));
    pos += length;
    if (id) {
      if (pending_unk) ids.push_back(pending_unk->first), lengths.push_back(pending_unk->second), pending_unk.reset();
      ids.push_back(*id);
      lengths.push_back(length);
    } else if (unk_id_ >= 0) {
      if (pending_unk && options_.fuse_unk) {
        pending_unk->second += length;
        continue;
      }
      if (pending_unk) ids.push_back(pending_unk->first), lengths.push_back(pending_unk->second);
      pending_unk = std::pair{unk_id_, length};
    }
  }
  if (pending_unk) ids.push_back(pending_unk->first), lengths.push_back(pending_unk->second);
}

void Bpe::merge_word(std::string_view word, std::vector<int32_t>& ids) const {
  std::vector<int32_t> initial_ids;
  std::vector<uint32_t> lengths;
  initial_symbols(word, initial_ids, lengths);
  std::vector<Symbol> symbols(initial_ids.size());
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> queue;
  for (size_t i = 0; i < symbols.size(); ++i) {
    symbols[i] = Symbol{initial_ids[i], int64_t(i) - 1, i + 1 < symbols.size() ? int64_t(i) + 1 : -1, lengths[i]};
    if (i > 0) {
      if (const Merge* merge = find_merge(initial_ids[i - 1], initial_ids[i])) queue.push({merge->rank, i - 1, merge->new_id});
    }
  }
  while (!queue.empty()) {
    const Candidate top = queue.top();
    queue.pop();
    Symbol& current = symbols[top.pos];
    if (current.length == 0 || current.next < 0) continue;
    const Symbol right = symbols[size_t(current.next)];
    const Merge* merge = find_merge(current.id, right.id);
    if (merge == nullptr || merge->new_id != top.new_id) continue;  // stale: a neighbour changed since
    symbols[size_t(current.next)].length = 0;
    current.id = top.new_id;
    current.length += right.length;
    current.next = right.next;
    if (right.next >= 0) symbols[size_t(right.next)].prev = int64_t(top.pos);
    if (current.prev >= 0) {
      if (const Merge* m = find_merge(symbols[size_t(current.prev)].id, current.id)) {
        queue.push({m->rank, size_t(current.prev), m->new_id});
      }
    }
    if (current.next >= 0) {
      if (const Merge* m = find_merge(current.id, symbols[size_t(current.next)].id)) queue.push({m->rank, top.pos, m->new_id});
    }
  }
  for (const Symbol& symbol : symbols) {
    if (symbol.length != 0) ids.push_back(symbol.id);
  }
}

}  // namespace hpctrain::tokenize::detail
