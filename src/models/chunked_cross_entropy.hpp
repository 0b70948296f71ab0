// Private to src/models: the chunked fused head + cross-entropy of Note [Chunked loss] (loss.hpp), on the kept
// tokens only (loss.cpp drops the others first).
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>

#include "hpctrain/models/nf4.hpp"

#include <cstdint>

namespace hpctrain::models::detail {

// The head applied to n kept tokens: logits [n, V] = hidden @ weight^T + lora_input @ lora_weight^T.
struct HeadProduct {
  at::Tensor hidden;       // [n, D]
  at::Tensor weight;       // [V, D], or undefined:
  const Quant4Weight* quantized = nullptr;  // the head in 4 bits, its products fused (Note [Quantized embeddings])
  at::Tensor lora_input;   // [n, r]: dropout(hidden) @ lora_A^T, or undefined (no adapter on the head)
  at::Tensor lora_weight;  // [V, r]: scaling * lora_B, or undefined
};

// The dtype of the head's matrix products: the autocast dtype inside an autocast region of hidden's device, else
// the promoted dtype of hidden and weight (float32 for a 4-bit weight). The log-sum-exp runs in float32 (float64
// for float64 products).
[[nodiscard]] c10::ScalarType head_compute_dtype(const HeadProduct& product);

// Summed cross-entropy of the n targets (int64 [n] in [0, V), on hidden's device), chunk_tokens (> 0) rows at
// a time: a float32 scalar whose gradient reaches hidden, weight and the LoRA factors (those that require it).
[[nodiscard]] at::Tensor chunked_cross_entropy_sum(const HeadProduct& product, const at::Tensor& targets,
                                                   int64_t chunk_tokens);

// The same per target: float32 [n], no gradient.
[[nodiscard]] at::Tensor chunked_cross_entropy_per_target(const HeadProduct& product, const at::Tensor& targets,
                                                          int64_t chunk_tokens);

}  // namespace hpctrain::models::detail
