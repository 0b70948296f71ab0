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
// A frozen weight (LoRA's base, Note [LoRA] in lora.hpp) takes no weight gradient: 2 FLOPs forward and 2
// backward (the input gradient, which the adapters below it need), so 4 N_frozen + 6 N_trainable; the
// adapters' lora_A and lora_B, outside N, are 6 per weight (WeightGradients). The input gradients are counted
// down to the first layer even where no adapter lies below (as PEFT's estimates do).
#pragma once

#include <optional>

#include "hpctrain/io/hf_config.hpp"
#include "hpctrain/models/model.hpp"

namespace hpctrain::models {

// Which matrix-product weights take a weight gradient (Note [Model FLOPs]); the default: all of N (full training).
struct WeightGradients {
  // Of the config's N, the weights that train (LoRA: the modules to save's); nullopt: all of them. Counted as at
  // most N (the classifier's d x labels, which N leaves out, is then counted as one of N's).
  std::optional<double> trainable_in_base;
  double outside_base = 0;  // trainable matrix-product weights that N does not count (LoRA's lora_A and lora_B)
};

// Note [Model FLOPs] for distilbert, bert, gpt2, llama and qwen2 at context length `context` (tokens per
// row); nullopt for models without the formula (the image models).
[[nodiscard]] std::optional<double> training_flops_per_token(const io::HfConfig& config, double context,
                                                             const WeightGradients& gradients = {});

// The model's split by requires_grad: trainable lora_A / lora_B weights outside N, the other trainable matrices
// (2-D parameters) in it; every parameter trainable gives the default (full training).
[[nodiscard]] WeightGradients weight_gradients(const Model& model);

}  // namespace hpctrain::models
