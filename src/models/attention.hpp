// Private to src/models: the multi-head self-attention DistilBERT and BERT share.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace hpctrain::models::detail {

// Multi-head scaled dot-product self-attention on projected q, k, v [B, L, heads * head_dim] ->
// context [B, L, heads * head_dim]. Padded keys (key_mask == 0) get the dtype's lowest value added
// to their scores, as transformers' `(1 - mask) * finfo(dtype).min`, so they get zero weight and
// padding never changes real tokens' outputs. Dropout on the probabilities only when `training`.
// Holds at most one [L, L] score matrix per head at a time, in forward and in backward
// (Note [Attention memory] in attention.cpp).
[[nodiscard]] at::Tensor self_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                        const at::Tensor& key_mask, int64_t heads, double dropout,
                                        bool training);

}  // namespace hpctrain::models::detail
