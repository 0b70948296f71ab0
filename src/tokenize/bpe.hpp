// The BPE model of Hugging Face tokenizers (models/bpe): a word's characters become symbols that are merged,
// lowest merge rank first (leftmost on ties), exactly as tokenizers' Word::merge_all does.
#pragma once

#include "hpctrain/tokenize/vocab.hpp"

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace hpctrain::tokenize::detail {

struct BpeOptions {
  std::optional<std::string> unk_token;  // unset: characters outside the vocabulary are dropped (as tokenizers)
  bool fuse_unk = false;                 // consecutive unknown characters give one unk token
  bool ignore_merges = false;            // a word that is itself in the vocabulary is one token (Llama-3)
};

class Bpe {
 public:
  // merges: (left, right) token pairs, rank = position; both and their concatenation must be in vocab. A pair
  // listed twice keeps its last rank (as tokenizers' HashMap collect). origin names the merges in errors.
  Bpe(Vocab vocab, const std::vector<std::pair<std::string, std::string>>& merges, BpeOptions options,
      const std::string& origin);
  Bpe(Bpe&& other) noexcept;

  // Appends the ids of one pre-tokenized word (byte-level characters). Thread-safe; results of short words are
  // cached (up to kCacheCapacity words, then no more are added, like tokenizers).
  void tokenize(std::string_view word, std::vector<int32_t>& ids) const;

  [[nodiscard]] const Vocab& vocab() const { return vocab_; }
  [[nodiscard]] size_t merge_count() const { return merges_.size(); }

  static constexpr size_t kCacheCapacity = 10000;
  static constexpr size_t kMaxCachedWordBytes = 256;

 private:
  struct Merge {
    uint32_t rank;
    int32_t new_id;
  };
  static uint64_t pair_key(int32_t left, int32_t right) { return (uint64_t(uint32_t(left)) << 32) | uint32_t(right); }
  [[nodiscard]] const Merge* find_merge(int32_t left, int32_t right) const;
  void merge_word(std::string_view word, std::vector<int32_t>& ids) const;
  void initial_symbols(std::string_view word, std::vector<int32_t>& ids, std::vector<uint32_t>& lengths) const;

  Vocab vocab_;
  std::unordered_map<uint64_t, Merge> merges_;
  BpeOptions options_;
  int32_t unk_id_ = -1;
  mutable std::mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<int32_t>> cache_;
};

}  // namespace hpctrain::tokenize::detail
