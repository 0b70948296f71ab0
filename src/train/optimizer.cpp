// train::Optimizer (optimizer.hpp): parameter groups, the counted step, strict state loading.
#include "hpctrain/train/optimizer.hpp"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <set>

#include "hpctrain/core/error.hpp"
#include "hpctrain/models/tensor_io.hpp"

namespace hpctrain::train {

bool excluded_from_weight_decay(const std::string& name) {
  auto ends_with = [&](const std::string& suffix) {
    return name.size() >= suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  if (ends_with("bias")) return true;
  return name.find("LayerNorm.") != std::string::npos || name.find("layer_norm.") != std::string::npos;
}

std::vector<ParameterGroup> weight_decay_groups(const NamedParameters& named, double weight_decay) {
  ParameterGroup decay{"decay", weight_decay, {}};
  ParameterGroup no_decay{"no_decay", 0.0, {}};
  for (const auto& item : named) (excluded_from_weight_decay(item.first) ? no_decay : decay).parameters.push_back(item);
  std::vector<ParameterGroup> groups;
  for (ParameterGroup* group : {&decay, &no_decay})
    if (!group->parameters.empty()) groups.push_back(std::move(*group));
  return groups;
}

Optimizer::Optimizer(std::vector<ParameterGroup> groups) : groups_(std::move(groups)) {
  std::set<std::string> names;
  for (const ParameterGroup& group : groups_) {
    for (const auto& [name, tensor] : group.parameters) {
      HPCTRAIN_CHECK(names.insert(name).second, "optimizer: parameter '{}' is in more than one group (or twice)", name);
      HPCTRAIN_CHECK(tensor.defined(), "optimizer: parameter '{}' is an undefined tensor", name);
      parameters_.push_back(Parameter{name, tensor, group.weight_decay});
    }
  }
}

Optimizer::~Optimizer() = default;

void Optimizer::step(double lr) {
  at::NoGradGuard no_grad;
  ++steps_;
  update(lr);
}

void Optimizer::zero_grad() {
  for (const Parameter& p : parameters_) {
    at::Tensor grad = p.tensor.mutable_grad();
    if (grad.defined()) grad.zero_();
  }
}

OptimizerState Optimizer::state_dict() const {
  OptimizerState state = state_tensors();
  state["step"] = at::scalar_tensor(steps_, at::kLong);
  return state;
}

int64_t Optimizer::state_bytes() const {
  int64_t bytes = 0;
  for (const auto& [name, tensor] : state_tensors()) bytes += static_cast<int64_t>(tensor.nbytes());
  return bytes;
}

void Optimizer::load_state_dict(const OptimizerState& state) {
  const auto step = state.find("step");
  HPCTRAIN_CHECK(step != state.end() && step->second.numel() == 1,
                 "optimizer state does not fit the model: {}", step == state.end() ? "missing 'step'"
                 : fmt::format("'step' has {} elements, expected 1", step->second.numel()));
  OptimizerState tensors = state;
  tensors.erase("step");
  models::copy_tensors_strict(tensors, state_tensors(), "optimizer state does not fit the model");
  steps_ = step->second.item<int64_t>();
}

}  // namespace hpctrain::train
