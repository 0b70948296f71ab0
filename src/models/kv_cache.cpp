// The per-layer key/value store of generation (kv_cache.hpp).
#include "hpctrain/models/kv_cache.hpp"

#include "hpctrain/core/error.hpp"

#include <ATen/ATen.h>

#include <algorithm>

namespace hpctrain::models {

namespace {

// A [B, capacity, width] store holding `kept` tokens of `old` (if defined) at the front.
at::Tensor grown_store(const at::Tensor& old, const at::Tensor& like, int64_t capacity, int64_t kept) {
  at::Tensor store = at::empty({like.size(0), capacity, like.size(2)}, like.options());
  if (kept > 0) store.slice(1, 0, kept).copy_(old.slice(1, 0, kept));
  return store;
}

}  // namespace

std::pair<at::Tensor, at::Tensor> LayerKvCache::append(const at::Tensor& keys, const at::Tensor& values) {
  HPCTRAIN_CHECK(keys.dim() == 3 && values.sizes() == keys.sizes(),
                 "KV cache: keys and values must be [batch, tokens, width] of one shape, got {} and {}",
                 c10::str(keys.sizes()), c10::str(values.sizes()));
  if (keys_.defined()) {
    HPCTRAIN_CHECK(
        keys.size(0) == keys_.size(0) && keys.size(2) == keys_.size(2) && keys.scalar_type() == keys_.scalar_type(),
        "KV cache: new keys {} {} do not match the cached [{}, *, {}] {}", c10::str(keys.sizes()),
        std::string(c10::toString(keys.scalar_type())), keys_.size(0), keys_.size(2),
        std::string(c10::toString(keys_.scalar_type())));
  }
  const int64_t needed = length_ + keys.size(1);
  const int64_t capacity = keys_.defined() ? keys_.size(1) : 0;
  if (needed > capacity) {
    const int64_t new_capacity = std::max({needed, 2 * capacity, reserve_});
    keys_ = grown_store(keys_, keys, new_capacity, length_);
    values_ = grown_store(values_, values, new_capacity, length_);
  }
  keys_.slice(1, length_, needed).copy_(keys);
  values_.slice(1, length_, needed).copy_(values);
  length_ = needed;
  return {keys_.slice(1, 0, length_), values_.slice(1, 0, length_)};
}

KvCache::KvCache(size_t layers, int64_t reserve) : layers_(layers) {
  for (LayerKvCache& layer : layers_) layer.set_reserve(reserve);
}

LayerKvCache& KvCache::layer(size_t index) {
  HPCTRAIN_CHECK(index < layers_.size(), "KV cache: layer {} of a cache for {} layers", index, layers_.size());
  return layers_[index];
}

}  // namespace hpctrain::models
