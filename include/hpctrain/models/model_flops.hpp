// The floating-point work of training a transformer per token, from its config alone: what MFU (model FLOPs
// utilization, as llm.c, nanoGPT and PaLM report it) divides by the peak.
//
// Note [Model FLOPs]
// Training one token costs 6 N + 12 L d T floating-point operations (PaLM, appendix B; nanoGPT's
// estimate_mfu): N the parameters that take part in matrix products (the layers' weights and the head's:
// the vocabulary projection of a causal LM counts once even when tied to the embedding; the embedding
// lookups, norms and biases do not), 2 FLOPs per weight per token forward and 4 backward; L the layers,
// d the attention width (heads x head size) and T the context length: the scores QK^T and their product
// with V, forward and backward. Causal masking is not discounted (as nanoGPT and llm.c). Recomputation
// (gradient checkpointing) is not counted: MFU counts the model's FLOPs, not the hardware's.
#pragma once

#include <optional>

#include "hpctrain/io/hf_config.hpp"

namespace hpctrain::models {

// Note [Model FLOPs] for distilbert, bert, gpt2, llama and qwen2 at context length `context` (tokens per
// row); nullopt for models without the formula (the image models).
[[nodiscard]] std::optional<double> training_flops_per_token(const io::HfConfig& config, double context);

}  // namespace hpctrain::models
