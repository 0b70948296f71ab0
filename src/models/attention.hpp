// Private to src/models: the multi-head self-attention DistilBERT and BERT share, and its causal variant for
// the decoder-only language models (GPT-2, Llama, Qwen2).
#pragma once

#include "hpctrain/compat/torch.hpp"

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
// mask when there is no padding, so the flash kernel is eligible. `documents` int64 [B, L] (Lq == Lk == L, no KV
// cache), or undefined: a query attends only to keys with its document id (Note [Packed attention]).
[[nodiscard]] at::Tensor causal_self_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                               const at::Tensor& key_mask, int64_t heads, int64_t kv_heads,
                                               double scale, double dropout, bool training,
                                               const at::Tensor& documents = at::Tensor());

// The float mask SDPA gets on CUDA for causal attention (Note [Packed attention]): bias [B, 1, 1, Lk] (the padding
// bias, zeros without padding) expanded to [B, 1, Lq, Lk] with the dtype's lowest value on every key after its
// query (bottom-right aligned) or, with documents [B, Lk], in another document than the query's.
[[nodiscard]] at::Tensor causal_attention_bias(const at::Tensor& bias, const at::Tensor& documents, int64_t query_length);

#if HPCTRAIN_TORCH_2
// causal_self_attention's CUDA path (any device: the cuda-logic tests run it on the CPU): SDPA with is_causal and no
// mask without padding or documents (flash-eligible); else one float mask [B, 1, Lq, Lk] (causal_attention_bias).
// q [B, H, Lq, d], k, v [B, H, Lk, d] (key/value heads repeated), bias [B, 1, 1, Lk]. SDPA's own scale is 1/sqrt(d):
// q is rescaled for any other `scale` (LibTorch 2.0 has no scale argument).
[[nodiscard]] at::Tensor causal_sdpa(at::Tensor q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& key_mask,
                                     const at::Tensor& bias, const at::Tensor& documents, double scale, double p);
#endif

}  // namespace hpctrain::models::detail
