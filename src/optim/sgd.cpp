// Sgd (sgd.hpp): torch.optim.SGD (foreach off) as tensor operations, in the same order and dtype.
#include "hpctrain/optim/sgd.hpp"

#include <ATen/ATen.h>

#include <utility>

#include "hpctrain/core/error.hpp"

namespace hpctrain::optim {

Sgd::Sgd(std::vector<ParameterGroup> groups, SgdOptions options) : Optimizer(std::move(groups)), options_(options) {
  HPCTRAIN_CHECK(!options_.nesterov || (options_.momentum > 0 && options_.dampening == 0),
                 "SGD: Nesterov momentum needs momentum > 0 and dampening 0 (got momentum {}, dampening {})",
                 options_.momentum, options_.dampening);
  for (const Parameter& p : parameters()) {
    Slot slot;
    slot.param = p.tensor, slot.name = p.name, slot.weight_decay = p.weight_decay;
    if (options_.momentum != 0.0) {
      slot.buffer = at::zeros_like(p.tensor, at::MemoryFormat::Contiguous);
      slot.steps = at::zeros({}, p.tensor.options().dtype(at::kLong));
    }
    slots_.push_back(std::move(slot));
  }
}

nlohmann::json Sgd::hyperparameters() const {
  return {{"momentum", options_.momentum}, {"dampening", options_.dampening}, {"nesterov", options_.nesterov}};
}

// torch.optim.SGD (_single_tensor_sgd): d_p = g + wd p; buf = d_p (first) or momentum buf + (1 - dampening) d_p;
// d_p = d_p + momentum buf (Nesterov) or buf; p -= lr d_p.
void Sgd::update(double lr) {
  for (Slot& slot : slots_) {
    const at::Tensor& grad = slot.param.grad();
    if (!grad.defined()) continue;
    at::Tensor d_p = slot.weight_decay != 0.0 ? grad.add(slot.param, slot.weight_decay) : grad;
    if (options_.momentum != 0.0) {
      if (slot.host_steps == 0) slot.buffer.copy_(d_p);
      else slot.buffer.mul_(options_.momentum).add_(d_p, 1.0 - options_.dampening);
      slot.steps.add_(1);
      ++slot.host_steps;
      d_p = options_.nesterov ? d_p.add(slot.buffer, options_.momentum) : slot.buffer;
    }
    slot.param.add_(d_p, -lr);
  }
}

void Sgd::state_loaded() {
  for (Slot& slot : slots_)
    if (slot.steps.defined()) slot.host_steps = slot.steps.item<int64_t>();  // once per load, not per step
}

OptimizerState Sgd::state_tensors() const {
  OptimizerState state;
  if (options_.momentum == 0.0) return state;
  for (const Slot& slot : slots_) {
    state["momentum_buffer." + slot.name] = slot.buffer;
    state["step." + slot.name] = slot.steps;
  }
  return state;
}

}  // namespace hpctrain::optim
