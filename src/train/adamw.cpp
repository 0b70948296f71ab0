#include "hpctrain/train/adamw.hpp"

#include <ATen/Dispatch.h>
#include <ATen/core/grad_mode.h>
#include <fmt/ranges.h>
#include <ATen/Parallel.h>

#include <cmath>

#include "adamw_kernel.hpp"
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
    slot.exp_avg = at::zeros_like(param, at::MemoryFormat::Contiguous);
    slot.exp_avg_sq = at::zeros_like(param, at::MemoryFormat::Contiguous);
    slot.decay = !excluded_from_weight_decay(name);
    slots_.push_back(std::move(slot));
  }
}

namespace {

// Whether detail::adamw_update can take this slot: CPU, float32 or float64, all four tensors dense and
// contiguous in the same dtype (Note [Fused AdamW] in adamw_kernel.cpp).
bool fusable(const at::Tensor& param, const at::Tensor& grad, const at::Tensor& exp_avg, const at::Tensor& exp_avg_sq) {
  const at::ScalarType dtype = param.scalar_type();
  if (dtype != at::kFloat && dtype != at::kDouble) return false;
  for (const at::Tensor* t : {&param, &grad, &exp_avg, &exp_avg_sq}) {
    if (!t->is_cpu() || t->layout() != at::kStrided || t->scalar_type() != dtype || !t->is_contiguous()) return false;
  }
  return true;
}

void fused_update(const at::Tensor& param, const at::Tensor& grad, const at::Tensor& exp_avg,
                  const at::Tensor& exp_avg_sq, const detail::AdamWScalars& scalars) {
  AT_DISPATCH_FLOATING_TYPES(param.scalar_type(), "hpctrain_adamw", [&] {
    scalar_t* p = param.data_ptr<scalar_t>();
    scalar_t* m = exp_avg.data_ptr<scalar_t>();
    scalar_t* v = exp_avg_sq.data_ptr<scalar_t>();
    const scalar_t* g = grad.data_ptr<scalar_t>();
    at::parallel_for(0, param.numel(), 1 << 15, [&](int64_t first, int64_t last) {
      detail::adamw_update(p + first, m + first, v + first, g + first, last - first, scalars);
    });
  });
}

// The same update as tensor operations, exactly torch.optim.AdamW's (any dtype, any device).
void tensor_update(const at::Tensor& param, const at::Tensor& grad, const at::Tensor& exp_avg,
                   const at::Tensor& exp_avg_sq, const detail::AdamWScalars& s) {
  if (s.decay_factor != 1.0) param.mul_(s.decay_factor);
  exp_avg.mul_(s.beta1).add_(grad, 1.0 - s.beta1);
  exp_avg_sq.mul_(s.beta2).addcmul_(grad, grad, 1.0 - s.beta2);
  const at::Tensor denom = (exp_avg_sq.sqrt() / s.bias_correction2_sqrt).add_(s.eps);
  param.addcdiv_(exp_avg, denom, -s.step_size);
}

}  // namespace

void AdamW::step(double lr) {
  at::NoGradGuard no_grad;
  ++step_;
  detail::AdamWScalars scalars;
  scalars.beta1 = options_.beta1;
  scalars.beta2 = options_.beta2;
  scalars.eps = options_.eps;
  scalars.bias_correction2_sqrt = std::sqrt(1.0 - std::pow(options_.beta2, static_cast<double>(step_)));
  scalars.step_size = lr / (1.0 - std::pow(options_.beta1, static_cast<double>(step_)));
  for (auto& slot : slots_) {
    const at::Tensor& grad = slot.param.grad();
    if (!grad.defined()) continue;
    scalars.decay_factor = slot.decay && options_.weight_decay != 0.0 ? 1.0 - lr * options_.weight_decay : 1.0;
    if (options_.fused && fusable(slot.param, grad, slot.exp_avg, slot.exp_avg_sq)) {
      fused_update(slot.param, grad, slot.exp_avg, slot.exp_avg_sq, scalars);
    } else {
      tensor_update(slot.param, grad, slot.exp_avg, slot.exp_avg_sq, scalars);
    }
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
