// The parameters without weight decay, from the module tree (weight_decay.hpp, Note [Weight decay groups]).
#include "hpctrain/models/weight_decay.hpp"

#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/normalization.h>

#include "hpctrain/models/llama.hpp"

namespace hpctrain::models {
namespace {

void collect(const torch::nn::Module& module, const std::string& prefix, std::set<std::string>& names) {
  const bool norm = is_norm_module(module);
  for (const auto& item : module.named_parameters(/*recurse=*/false))
    if (norm || item.key() == "bias") names.insert(prefix + item.key());
  for (const auto& child : module.named_children()) collect(*child.value(), prefix + child.key() + ".", names);
}

}  // namespace

bool is_norm_module(const torch::nn::Module& module) {
  return dynamic_cast<const torch::nn::LayerNormImpl*>(&module) != nullptr ||
         dynamic_cast<const torch::nn::GroupNormImpl*>(&module) != nullptr ||
         dynamic_cast<const torch::nn::BatchNorm1dImpl*>(&module) != nullptr ||
         dynamic_cast<const torch::nn::BatchNorm2dImpl*>(&module) != nullptr ||
         dynamic_cast<const torch::nn::BatchNorm3dImpl*>(&module) != nullptr ||
         dynamic_cast<const LlamaRMSNorm*>(&module) != nullptr;
}

std::set<std::string> no_weight_decay_parameters(const torch::nn::Module& model) {
  std::set<std::string> names;
  collect(model, "", names);
  return names;
}

}  // namespace hpctrain::models
