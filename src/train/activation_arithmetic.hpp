// Private to src/train: the activation bytes of one training step by model family (Note [Activation arithmetic]
// in memory_estimate.cpp for the encoders, Note [Decoder activation arithmetic] in decoder_memory_estimate.cpp).
#pragma once

#include <cstdint>
#include <string>

#include "hpctrain/io/hf_config.hpp"
#include "hpctrain/train/memory_estimate.hpp"

namespace hpctrain::train::detail {

// Bytes of one activation value: 4 for fp32, 2 for bf16 (autocast's matrix products); Error otherwise.
[[nodiscard]] int64_t activation_bytes(const std::string& precision);

// What one pre- or post-LayerNorm transformer block (DistilBERT, BERT, GPT-2) keeps for backward, bytes, for
// `tokens` = batch x sequence tokens of width `width` and feed-forward width `ffn_width`; `a` = activation_bytes.
[[nodiscard]] int64_t layer_norm_block_bytes(int64_t tokens, int64_t width, int64_t ffn_width, int64_t a);

// The decoders' (gpt2, llama, qwen2) activations, logits and loss included. Error when the sequence is longer
// than the model's positions.
[[nodiscard]] ActivationEstimate decoder_activations(const io::HfConfig& config, const MemoryEstimateOptions& options);

}  // namespace hpctrain::train::detail
