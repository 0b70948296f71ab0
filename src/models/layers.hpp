// Private to src/models: building blocks shared by DistilBERT and BERT (activations,
// transformers-style initialization); attention is in attention.hpp.
#pragma once

#include "hpctrain/io/hf_config.hpp"

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/normalization.h>

#include <cstdint>
#include <string>

namespace hpctrain::models::detail {

// transformers' ACT2FN for the activations config.json may name.
[[nodiscard]] at::Tensor activate(const at::Tensor& x, io::Activation activation);

// transformers' _init_weights for every Linear, Embedding and LayerNorm below `root`: weights
// normal(0, std), biases zero, the Embedding padding row zero, LayerNorm weight 1 bias 0.
void init_like_transformers(torch::nn::Module& root, double std);

// DistilBERT's create_sinusoidal_embeddings: angle pos / 10000^(2*(j/2)/dim) in double, sin on even
// columns, cos on odd, rounded to float32 -> [n_pos, dim].
[[nodiscard]] at::Tensor sinusoidal_table(int64_t n_pos, int64_t dim);

// Inside an autocast region: norm(x) in the weights' dtype (float32) with autocast off for it (an fp32 island,
// as autocast's fp32 ops): LayerNorm statistics of bf16/fp16 activations are computed in fp32, and the
// output is fp32 (so is the residual stream). Outside autocast: norm(x).
[[nodiscard]] at::Tensor norm_in_fp32(const torch::nn::LayerNorm& norm, const at::Tensor& x);

}  // namespace hpctrain::models::detail
