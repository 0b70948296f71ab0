// Which parameters of a model take no weight decay, decided by what they are (the module type), not by name.
//
// Note [Weight decay groups]
// Hugging Face's Trainer (transformers 5.24, Trainer.get_decay_parameter_names) decays every parameter but those
// of an nn.LayerNorm (by type) and those whose lower-cased name holds "bias", "layernorm", "rmsnorm", a ".norm."
// component or "_norm": in effect every normalisation layer's weights and every bias. hpctrain decides the same
// set from the module tree: a parameter of a normalisation module (torch::nn::LayerNorm, GroupNorm, BatchNorm,
// LlamaRMSNorm, which Qwen2 shares) or a parameter whose own name is "bias". Matching names
// instead missed GPT-2's ln_1/ln_2/ln_f and Llama's input_layernorm/post_attention_layernorm/norm (they were
// decayed). tests/optim/weight_decay_test.cpp checks the set against transformers' function on GPT-2, Llama,
// Qwen2, BERT and DistilBERT, with and without LoRA (golden: tests/optim/golden/make_weight_decay_goldens.py).
// optim::weight_decay_groups (optim/optimizer.hpp) is the one grouping every optimizer path uses.
#pragma once

#include <torch/nn/module.h>

#include <set>
#include <string>

namespace hpctrain::models {

// The names (as model.named_parameters() gives them) of the parameters that take no weight decay: every
// parameter of a normalisation module and every parameter named "bias" (Note [Weight decay groups]).
[[nodiscard]] std::set<std::string> no_weight_decay_parameters(const torch::nn::Module& model);

// Whether `module` is a normalisation layer (its weights are scales, never decayed).
[[nodiscard]] bool is_norm_module(const torch::nn::Module& module);

}  // namespace hpctrain::models
