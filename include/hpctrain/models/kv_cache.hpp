// The key/value cache of a causal LM's generation: per layer, the keys and values of every token seen so far, so
// that each new token costs one position's forward instead of the whole sequence's (Note [KV cache]).
// Not here: the decoding loop and the samplers (generation.hpp).
//
// Note [KV cache]
// CausalLM::forward_cached(input_ids, cache) runs the new tokens at positions cache.length() ... + L - 1: GPT-2
// adds the position embeddings of those positions, Llama rotates q and k by them; each attention layer projects
// only the new tokens, appends their keys (after the rotation: a cached key never changes) and values to its
// LayerKvCache, and attends from the new queries to every cached key through causal_self_attention's
// bottom-right alignment (Note [Causal attention] in src/models/attention.cpp). The training forward passes no
// cache and runs the same operations as before (bit-identical). No padding: every row of the batch is a sequence
// of the same length, and the cache is for inference (no gradients flow into it).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace hpctrain::models {

// One attention layer's keys and values, [B, length, width] with width = kv_heads * head_dim.
class LayerKvCache {
 public:
  // Tokens stored: the position of the next one.
  [[nodiscard]] int64_t length() const { return length_; }
  // Stores keys and values [B, L, width] after the cached tokens and returns all of them [B, length(), width]
  // (views of the store: valid until the next append).
  [[nodiscard]] std::pair<at::Tensor, at::Tensor> append(const at::Tensor& keys, const at::Tensor& values);
  // Tokens to make room for at the first append (a growing store copies what it holds).
  void set_reserve(int64_t tokens) { reserve_ = tokens; }

 private:
  at::Tensor keys_, values_;  // [B, capacity, width]: the capacity at least doubles when it is full
  int64_t length_ = 0;
  int64_t reserve_ = 0;
};

// The caches of a model's layers (CausalLM::num_layers() of them).
class KvCache {
 public:
  // reserve: the tokens (prompt + new) the caller expects, allocated at once (more grow the store).
  explicit KvCache(size_t layers, int64_t reserve = 0);

  [[nodiscard]] LayerKvCache& layer(size_t index);  // Error when index >= num_layers()
  [[nodiscard]] size_t num_layers() const { return layers_.size(); }
  // Tokens cached (every layer holds as many after a forward_cached): the position of the next token.
  [[nodiscard]] int64_t length() const { return layers_.empty() ? 0 : layers_.front().length(); }

 private:
  std::vector<LayerKvCache> layers_;
};

}  // namespace hpctrain::models
