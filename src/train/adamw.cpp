#include "hpctrain/train/adamw.hpp"

#include <cmath>

#include "hpctrain/core/error.hpp"

namespace hpctrain::train {

bool excluded_from_weight_decay(const std::string& name) {
  auto ends_with = [&](const std::string& suffix) {
    return name.size() >= suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  if (ends_with("bias")) return true;
  return name.find("LayerNorm.") != std::string::npos || name.find("layer_norm.") != std::string::npos;
}

AdamW::AdamW(std::vector<std::pair<std::string, at::Tensor>> named_parameters, AdamWOptions options)
    : options_(options) {
  for (auto& [name, param] : named_parameters) {
    Slot slot;
    slot.name = name;
    slot.param = param;
    slot.exp_avg = at::zeros_like(param, at::MemoryFormat::Preserve);
    slot.exp_avg_sq = at::zeros_like(param, at::MemoryFormat::Preserve);
    slot.decay = !excluded_from_weight_decay(name);
    slots_.push_back(std::move(slot));
  }
}

void AdamW::step(double lr) {
  at::NoGradGuard no_grad;
  ++step_;
  const double bias_correction1 = 1.0 - std::pow(options_.beta1, static_cast<double>(step_));
  const double bias_correction2_sqrt = std::sqrt(1.0 - std::pow(options_.beta2, static_cast<double>(step_)));
  const double step_size = lr / bias_correction1;
  for (auto& slot : slots_) {
    const at::Tensor& grad = slot.param.grad();
    if (!grad.defined()) continue;
    if (slot.decay && options_.weight_decay != 0.0) slot.param.mul_(1.0 - lr * options_.weight_decay);
    slot.exp_avg.mul_(options_.beta1).add_(grad, 1.0 - options_.beta1);
    slot.exp_avg_sq.mul_(options_.beta2).addcmul_(grad, grad, 1.0 - options_.beta2);
    const at::Tensor denom = (slot.exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(options_.eps);
    slot.param.addcdiv_(slot.exp_avg, denom, -step_size);
  }
}

void AdamW::zero_grad() {
  for (auto& slot : slots_) {
    at::Tensor grad = slot.param.mutable_grad();
    if (grad.defined()) grad.zero_();
  }
}

std::map<std::string, at::Tensor> AdamW::state_dict() const {
  std::map<std::string, at::Tensor> state;
  for (const auto& slot : slots_) {
    state["exp_avg." + slot.name] = slot.exp_avg;
    state["exp_avg_sq." + slot.name] = slot.exp_avg_sq;
  }
  state["step"] = at::scalar_tensor(step_, at::kLong);
  return state;
}

void AdamW::load_state_dict(const std::map<std::string, at::Tensor>& state) {
  std::vector<std::string> problems;
  auto take = [&](const std::string& key, at::Tensor& into) {
    auto it = state.find(key);
    if (it == state.end()) {
      problems.push_back(fmt::format("missing '{}'", key));
    } else if (it->second.sizes() != into.sizes()) {
      problems.push_back(fmt::format("'{}' has shape {}, expected {}", key, fmt::join(it->second.sizes(), "x"),
                                     fmt::join(into.sizes(), "x")));
    } else {
      at::NoGradGuard no_grad;
      into.copy_(it->second);
    }
  };
  for (auto& slot : slots_) {
    take("exp_avg." + slot.name, slot.exp_avg);
    take("exp_avg_sq." + slot.name, slot.exp_avg_sq);
  }
  auto step = state.find("step");
  if (step == state.end()) problems.push_back("missing 'step'");
  HPCTRAIN_CHECK(problems.empty(), "optimizer state does not fit the model: {}", fmt::join(problems, "; "));
  step_ = step->second.item<int64_t>();
}

}  // namespace hpctrain::train
