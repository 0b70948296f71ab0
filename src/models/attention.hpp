// Private to src/models: the multi-head self-attention DistilBERT and BERT share, and its causal variant for
// the decoder-only language models (GPT-2, Llama, Qwen2).
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

// Causal self-attention (Note [Causal attention] in attention.cpp): q [B, Lq, heads * head_dim] (rotated
// already where the model uses RoPE), k, v [B, Lk, kv_heads * head_dim] with Lk >= Lq, key_mask [B, Lk]
// (1 = token, 0 = padding, any dtype) or undefined (no padding) -> context [B, Lq, heads * head_dim].
// Query i sits at position i + (Lk - Lq) of the keys (bottom-right aligned: Lk > Lq is a KV cache) and attends
// to the keys at or before it that are not padding. Grouped-query attention: query head h uses key/value head
// h / (heads / kv_heads), as transformers' repeat_kv. `scale` multiplies the scores (1/sqrt(head_dim) usually).
// Same memory bound as self_attention on the CPU; on CUDA (LibTorch 2) SDPA with is_causal and no float
// mask when there is no padding, so the flash kernel is eligible.
[[nodiscard]] at::Tensor causal_self_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                               const at::Tensor& key_mask, int64_t heads, int64_t kv_heads,
                                               double scale, double dropout, bool training);

}  // namespace hpctrain::models::detail
