// TokenTable: an immutable open-addressing hash map from token bytes (looked up by string_view) to token id.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace hpctrain::tokenize {

class TokenTable {
 public:
  static constexpr int32_t kNotFound = -1;

  TokenTable() = default;
  // Adds a token with id >= 0; returns false (and changes nothing) when the token is already present.
  bool insert(std::string_view token, int32_t id);
  // Returns the id of token, or kNotFound.
  [[nodiscard]] int32_t find(std::string_view token) const;

  [[nodiscard]] size_t size() const { return size_; }
  [[nodiscard]] size_t max_token_bytes() const { return max_token_bytes_; }

 private:
  // Note [Token heads]: a slot keeps a 64-bit "head" of its key -- the whole key packed when it has at most
  // 8 bytes, its first 8 bytes otherwise -- so most lookups compare without touching keys_.
  struct Slot {
    uint64_t head = 0;
    int32_t id = kNotFound;  // kNotFound marks an empty slot
    uint32_t length = 0;
  };

  [[nodiscard]] size_t probe(std::string_view token) const;  // slot holding token, or the empty slot ending its chain
  [[nodiscard]] bool holds(size_t slot, std::string_view token, uint64_t head) const;
  void grow();

  std::vector<Slot> slots_;        // capacity is a power of two, at most half full
  std::vector<uint32_t> offsets_;  // per slot: where its key starts in keys_
  std::string keys_;               // all token bytes, back to back
  size_t size_ = 0;
  size_t max_token_bytes_ = 0;
};

}  // namespace hpctrain::tokenize
