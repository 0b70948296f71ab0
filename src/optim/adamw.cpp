// AdamW (adamw.hpp): the fused CPU loop (Note [Fused AdamW]) or torch.optim.AdamW's tensor operations.
#include "hpctrain/optim/adamw.hpp"

#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>

#include <cmath>
#include <utility>

#include "adamw_kernel.hpp"

namespace hpctrain::optim {

AdamW::AdamW(const NamedParameters& named_parameters, AdamWOptions options)
    : AdamW(weight_decay_groups(named_parameters, options.weight_decay), options) {}

AdamW::AdamW(std::vector<ParameterGroup> groups, AdamWOptions options)
    : Optimizer(std::move(groups)), options_(options) {
  for (const Parameter& p : parameters()) {
    Slot slot;
    slot.name = p.name;
    slot.param = p.tensor;
    slot.exp_avg = at::zeros_like(p.tensor, at::MemoryFormat::Contiguous);
    slot.exp_avg_sq = at::zeros_like(p.tensor, at::MemoryFormat::Contiguous);
    slot.weight_decay = p.weight_decay;
    slots_.push_back(std::move(slot));
  }
}

nlohmann::json AdamW::hyperparameters() const {
  return {{"betas", {options_.beta1, options_.beta2}}, {"eps", options_.eps}};
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

void AdamW::update(double lr) {
  detail::AdamWScalars scalars = detail::adamw_scalars(options_.beta1, options_.beta2, options_.eps, steps(), lr);
  for (auto& slot : slots_) {
    const at::Tensor& grad = slot.param.grad();
    if (!grad.defined()) continue;
    scalars.decay_factor = slot.weight_decay != 0.0 ? 1.0 - lr * slot.weight_decay : 1.0;
    if (options_.fused && fusable(slot.param, grad, slot.exp_avg, slot.exp_avg_sq)) {
      fused_update(slot.param, grad, slot.exp_avg, slot.exp_avg_sq, scalars);
    } else {
      tensor_update(slot.param, grad, slot.exp_avg, slot.exp_avg_sq, scalars);
    }
  }
}

OptimizerState AdamW::state_tensors() const {
  OptimizerState state;
  for (const auto& slot : slots_) {
    state["exp_avg." + slot.name] = slot.exp_avg;
    state["exp_avg_sq." + slot.name] = slot.exp_avg_sq;
  }
  return state;
}

}  // namespace hpctrain::optim
