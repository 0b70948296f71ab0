// AdamW (adamw.hpp): the fused CPU loop (Note [Fused AdamW]) or torch.optim.AdamW's tensor operations.
#include "hpctrain/optim/adamw.hpp"

#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>

#include <cmath>
#include <map>
#include <tuple>
#include <utility>

#include "adamw_kernel.hpp"
#include "adamw_lists.hpp"
#include "hpctrain/compat/torch.hpp"

namespace hpctrain::optim {

AdamW::AdamW(const NamedParameters& named_parameters, const std::set<std::string>& no_decay, AdamWOptions options)
    : AdamW(weight_decay_groups(named_parameters, options.weight_decay, no_decay), options) {}

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

// Note [AdamW off the CPU]
// Off the CPU a per-tensor update launches about six kernels per parameter, so parameters off the CPU are
// updated as lists, grouped by device, dtype and weight decay: LibTorch 2.x's fused CUDA kernel
// (at::_fused_adamw_, torch.optim.AdamW(fused=True): one launch per list chunk), else on CUDA the multi-tensor
// (_foreach_) operations of torch.optim.AdamW(foreach=True), the same operations in the same order as
// tensor_update (adamw_lists.hpp; tests/cuda_logic compares the two on the CPU), and on any other device
// tensor_update per list element (meta: LibTorch has no _foreach_ kernels for it). None reads anything back to
// the host. CPU parameters keep the loop above or tensor_update, so CPU results are unchanged.
using detail::TensorLists;

// torch's fused kernel exists for CUDA in LibTorch 2.x; it computes the bias corrections from `step` itself.
bool fused_device_update(TensorLists& l, int64_t step, double lr, double weight_decay, const AdamWOptions& o) {
#if HPCTRAIN_TORCH_2
  if (!l.params.front().is_cuda()) return false;
  const at::Tensor step_tensor = at::full({}, static_cast<double>(step), l.params.front().options().dtype(at::kFloat));
  const std::vector<at::Tensor> steps(l.params.size(), step_tensor);
  at::_fused_adamw_(l.params, l.grads, l.exp_avgs, l.exp_avg_sqs, {}, steps, lr, o.beta1, o.beta2, weight_decay, o.eps,
                    /*amsgrad=*/false, /*maximize=*/false);
  return true;
#else
  (void)l, (void)step, (void)lr, (void)weight_decay, (void)o;
  return false;
#endif
}

}  // namespace

void AdamW::update(double lr) {
  detail::AdamWScalars scalars = detail::adamw_scalars(options_.beta1, options_.beta2, options_.eps, steps(), lr);
  std::map<std::tuple<std::string, at::ScalarType, double>, TensorLists> device_lists;  // Note [AdamW off the CPU]
  for (auto& slot : slots_) {
    const at::Tensor& grad = slot.param.grad();
    if (!grad.defined()) continue;
    if (options_.fused && !slot.param.is_cpu()) {
      TensorLists& l = device_lists[{slot.param.device().str(), slot.param.scalar_type(), slot.weight_decay}];
      l.params.push_back(slot.param), l.grads.push_back(grad);
      l.exp_avgs.push_back(slot.exp_avg), l.exp_avg_sqs.push_back(slot.exp_avg_sq);
      continue;
    }
    scalars.decay_factor = slot.weight_decay != 0.0 ? 1.0 - lr * slot.weight_decay : 1.0;
    if (options_.fused && fusable(slot.param, grad, slot.exp_avg, slot.exp_avg_sq)) {
      fused_update(slot.param, grad, slot.exp_avg, slot.exp_avg_sq, scalars);
    } else {
      tensor_update(slot.param, grad, slot.exp_avg, slot.exp_avg_sq, scalars);
    }
  }
  for (auto& [key, lists] : device_lists) {
    const double weight_decay = std::get<2>(key);
    if (fused_device_update(lists, steps(), lr, weight_decay, options_)) continue;
    scalars.decay_factor = weight_decay != 0.0 ? 1.0 - lr * weight_decay : 1.0;
    if (lists.params.front().is_cuda()) {
      detail::adamw_foreach_update(lists, scalars);
    } else {  // LibTorch has _foreach_ kernels for the CPU and CUDA only
      for (std::size_t i = 0; i < lists.params.size(); ++i)
        tensor_update(lists.params[i], lists.grads[i], lists.exp_avgs[i], lists.exp_avg_sqs[i], scalars);
    }
  }
}

namespace detail {

void adamw_foreach_update(TensorLists& l, const AdamWScalars& s) {
  if (s.decay_factor != 1.0) at::_foreach_mul_(l.params, s.decay_factor);
  at::_foreach_mul_(l.exp_avgs, s.beta1);
  at::_foreach_add_(l.exp_avgs, l.grads, 1.0 - s.beta1);
  at::_foreach_mul_(l.exp_avg_sqs, s.beta2);
  at::_foreach_addcmul_(l.exp_avg_sqs, l.grads, l.grads, 1.0 - s.beta2);
  std::vector<at::Tensor> denom = at::_foreach_sqrt(l.exp_avg_sqs);
  at::_foreach_div_(denom, s.bias_correction2_sqrt);
  at::_foreach_add_(denom, s.eps);
  at::_foreach_addcdiv_(l.params, l.exp_avgs, denom, -s.step_size);
}

}  // namespace detail

OptimizerState AdamW::state_tensors() const {
  OptimizerState state;
  for (const auto& slot : slots_) {
    state["exp_avg." + slot.name] = slot.exp_avg;
    state["exp_avg_sq." + slot.name] = slot.exp_avg_sq;
  }
  return state;
}

}  // namespace hpctrain::optim
