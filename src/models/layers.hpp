// Private to src/models: building blocks shared by DistilBERT and BERT (attention, activations,
// transformers-style initialization).
#pragma once

#include "hpctrain/io/hf_config.hpp"

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include <cstdint>
#include <string>

namespace hpctrain::models::detail {

// Multi-head scaled dot-product self-attention on projected q, k, v [B, L, heads * head_dim] ->
// context [B, L, heads * head_dim]. Padded keys (key_mask == 0) get the dtype's lowest value added
// to their scores, as transformers' `(1 - mask) * finfo(dtype).min`, so they get zero weight and
// padding never changes real tokens' outputs. The mask is built in q's dtype (autocast-safe).
// Materializes one [B, heads, L, L] score tensor (scaled q, in-place mask add, softmax, dropout).
[[nodiscard]] at::Tensor self_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                        const at::Tensor& key_mask, int64_t heads, double dropout,
                                        bool training);

// transformers' ACT2FN for the activations config.json may name.
[[nodiscard]] at::Tensor activate(const at::Tensor& x, io::Activation activation);

// transformers' _init_weights for every Linear, Embedding and LayerNorm below `root`: weights
// normal(0, std), biases zero, the Embedding padding row zero, LayerNorm weight 1 bias 0.
void init_like_transformers(torch::nn::Module& root, double std);

// DistilBERT's create_sinusoidal_embeddings: angle pos / 10000^(2*(j/2)/dim) in double, sin on even
// columns, cos on odd, rounded to float32 -> [n_pos, dim].
[[nodiscard]] at::Tensor sinusoidal_table(int64_t n_pos, int64_t dim);

}  // namespace hpctrain::models::detail
