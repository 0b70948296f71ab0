// TokenTable: linear probing over 16-byte slots that hold each key's head (see Note [Token heads]).
#include "hpctrain/tokenize/token_table.hpp"

#include <cstring>

namespace hpctrain::tokenize {
namespace {

uint64_t load64(const char* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

uint32_t load32(const char* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// Keys of up to 8 bytes packed into 64 bits; for a fixed length the packing is one-to-one.
uint64_t head_of(std::string_view key) {
  const char* p = key.data();
  const size_t n = key.size();
  if (n > 8) return load64(p);
  if (n >= 4) return uint64_t(load32(p)) | (uint64_t(load32(p + n - 4)) << 32);
  if (n == 0) return 0;
  return uint64_t(uint8_t(p[0])) | uint64_t(uint8_t(p[n / 2])) << 8 | uint64_t(uint8_t(p[n - 1])) << 16;
}

uint64_t mix(uint64_t x) {
  x ^= x >> 32;
  x *= 0xd6e8feb86659fd93ull;
  x ^= x >> 32;
  return x;
}

uint64_t hash_of(std::string_view key, uint64_t head) {
  uint64_t h = mix(head ^ (key.size() * 0x9e3779b97f4a7c15ull));
  if (key.size() <= 8) return h;
  for (size_t i = 8; i + 8 <= key.size(); i += 8) h = mix(h ^ load64(key.data() + i));
  return mix(h ^ load64(key.data() + key.size() - 8));  // the last 8 bytes (overlapping)
}

}  // namespace

bool TokenTable::holds(size_t slot, std::string_view token, uint64_t head) const {
  const Slot& s = slots_[slot];
  if (s.head != head || s.length != token.size()) return false;
  return token.size() <= 8 || std::memcmp(keys_.data() + offsets_[slot] + 8, token.data() + 8, token.size() - 8) == 0;
}

size_t TokenTable::probe(std::string_view token) const {
  const uint64_t head = head_of(token);
  const size_t mask = slots_.size() - 1;
  for (size_t i = hash_of(token, head) & mask;; i = (i + 1) & mask) {
    if (slots_[i].id == kNotFound || holds(i, token, head)) return i;
  }
}

int32_t TokenTable::find(std::string_view token) const {
  if (slots_.empty()) return kNotFound;
  return slots_[probe(token)].id;
}

bool TokenTable::insert(std::string_view token, int32_t id) {
  if (2 * (size_ + 1) > slots_.size()) grow();
  const size_t slot = probe(token);
  if (slots_[slot].id != kNotFound) return false;
  slots_[slot] = Slot{head_of(token), id, uint32_t(token.size())};
  offsets_[slot] = uint32_t(keys_.size());
  keys_.append(token);
  ++size_;
  if (token.size() > max_token_bytes_) max_token_bytes_ = token.size();
  return true;
}

void TokenTable::grow() {
  const std::vector<Slot> old_slots = std::move(slots_);
  const std::vector<uint32_t> old_offsets = std::move(offsets_);
  slots_.assign(old_slots.empty() ? 64 : old_slots.size() * 2, Slot{});
  offsets_.assign(slots_.size(), 0);
  for (size_t i = 0; i < old_slots.size(); ++i) {
    if (old_slots[i].id == kNotFound) continue;
    const std::string_view key(keys_.data() + old_offsets[i], old_slots[i].length);
    const size_t slot = probe(key);
    slots_[slot] = old_slots[i];
    offsets_[slot] = old_offsets[i];
  }
}

}  // namespace hpctrain::tokenize
