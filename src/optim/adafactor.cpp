// Adafactor (adafactor.hpp): transformers.optimization.Adafactor.step as tensor operations, in its order.
#include "hpctrain/optim/adafactor.hpp"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <utility>

#include "hpctrain/core/error.hpp"

namespace hpctrain::optim {
namespace {

bool is_half(at::ScalarType type) { return type == at::kHalf || type == at::kBFloat16; }

// Transformers' _rms: norm / sqrt(numel), a 0-dim tensor.
at::Tensor rms(const at::Tensor& t) { return t.norm(2) / std::sqrt(static_cast<double>(t.numel())); }

// Transformers' _approx_sq_grad: rsqrt(row / mean(row)) (outer) rsqrt(col), the factored 1/sqrt(v).
at::Tensor approx_inverse_sqrt(const at::Tensor& row, const at::Tensor& col) {
  const at::Tensor r_factor = (row / row.mean(-1, /*keepdim=*/true)).rsqrt_().unsqueeze(-1);
  const at::Tensor c_factor = col.unsqueeze(-2).rsqrt();
  return at::mul(r_factor, c_factor);
}

}  // namespace

Adafactor::Adafactor(std::vector<ParameterGroup> groups, AdafactorOptions options)
    : Optimizer(std::move(groups)), options_(options) {
  HPCTRAIN_CHECK(!options_.warmup_init || options_.relative_step, "Adafactor: warmup_init needs relative_step");
  for (const Parameter& p : parameters()) {
    Slot slot;
    slot.param = p.tensor, slot.name = p.name, slot.weight_decay = p.weight_decay;
    const at::TensorOptions state = p.tensor.options().dtype(is_half(p.tensor.scalar_type()) ? at::kFloat
                                                                                               : p.tensor.scalar_type());
    slot.steps = at::zeros({}, p.tensor.options().dtype(at::kLong));
    const auto shape = p.tensor.sizes();
    if (shape.size() >= 2) {
      slot.row = at::zeros(shape.slice(0, shape.size() - 1), state);
      std::vector<int64_t> col_shape(shape.begin(), shape.end() - 2);
      col_shape.push_back(shape.back());
      slot.col = at::zeros(col_shape, state);
    } else {
      slot.exp_avg_sq = at::zeros(shape, state);
    }
    if (options_.beta1 > 0) slot.exp_avg = at::zeros(shape, state);
    slots_.push_back(std::move(slot));
  }
}

nlohmann::json Adafactor::hyperparameters() const {
  return {{"eps", {options_.eps1, options_.eps2}}, {"clip_threshold", options_.clip_threshold},
          {"decay_rate", options_.decay_rate}, {"beta1", options_.beta1},
          {"scale_parameter", options_.scale_parameter}, {"relative_step", options_.relative_step},
          {"warmup_init", options_.warmup_init}};
}

double Adafactor::relative_step_size(double lr, int64_t t) const {
  if (!options_.relative_step) return lr;
  const double min_step = options_.warmup_init ? 1e-6 * static_cast<double>(t) : 1e-2;
  return std::min(min_step, 1.0 / std::sqrt(static_cast<double>(t)));
}

double Adafactor::step_size(double lr, int64_t t, double parameter_rms) const {
  const double scale = options_.scale_parameter ? std::max(options_.eps2, parameter_rms) : 1.0;
  return scale * relative_step_size(lr, t);
}

namespace {

// Note [Adafactor without host reads]
// The step size of scale_parameter multiplies by the parameter's RMS, which lives where the parameter does.
// On the CPU it is read as a double (no device to wait for, and the bits of Transformers' Python float); on
// a device it stays a 0-dim float64 tensor, rounded to float32 before it multiplies as the host scalar would
// be, so a step never waits for the device. Step counters are mirrored on the host (Slot::host_steps).
struct StepSize {
  double host = 0.0;
  at::Tensor device;  // defined: the step size as a 0-dim float32 tensor on the parameter's device

  void scale(at::Tensor& update) const {
    if (device.defined()) update.mul_(device);
    else update.mul_(host);
  }
  void decay(at::Tensor& p, double weight_decay) const {
    if (device.defined()) p.add_(p * (device * -weight_decay));
    else p.add_(p, -weight_decay * host);
  }
};

}  // namespace

void Adafactor::update(double lr) {
  for (Slot& slot : slots_)
    if (slot.param.grad().defined()) update_slot(slot, lr);
}

void Adafactor::update_slot(Slot& slot, double lr) {
  const bool half = is_half(slot.param.scalar_type());
  const at::Tensor grad = half ? slot.param.grad().to(at::kFloat) : slot.param.grad();
  at::Tensor p = half ? slot.param.to(at::kFloat) : slot.param;
  slot.steps.add_(1);
  const int64_t t = ++slot.host_steps;
  StepSize alpha;  // Note [Adafactor without host reads]
  if (options_.scale_parameter && !p.is_cpu()) {
    alpha.device = (rms(p).to(at::kDouble).clamp_min(options_.eps2) * relative_step_size(lr, t)).to(at::kFloat);
  } else {
    alpha.host = step_size(lr, t, options_.scale_parameter ? rms(p).item<double>() : 0.0);
  }
  const double beta2t = 1.0 - std::pow(static_cast<double>(t), options_.decay_rate);
  at::Tensor update = grad.pow(2) + options_.eps1;
  if (slot.row.defined()) {
    slot.row.mul_(beta2t).add_(update.mean(-1), 1.0 - beta2t);
    slot.col.mul_(beta2t).add_(update.mean(-2), 1.0 - beta2t);
    update = approx_inverse_sqrt(slot.row, slot.col).mul_(grad);
  } else {
    slot.exp_avg_sq.mul_(beta2t).add_(update, 1.0 - beta2t);
    update = slot.exp_avg_sq.rsqrt().mul_(grad);
  }
  update.div_((rms(update) / options_.clip_threshold).clamp_(1.0));
  alpha.scale(update);
  if (slot.exp_avg.defined()) {
    slot.exp_avg.mul_(options_.beta1).add_(update, 1.0 - options_.beta1);
    update = slot.exp_avg;
  }
  if (slot.weight_decay != 0.0) alpha.decay(p, slot.weight_decay);
  p.add_(-update);
  if (half) slot.param.copy_(p);
}

void Adafactor::state_loaded() {
  for (Slot& slot : slots_) slot.host_steps = slot.steps.item<int64_t>();  // once per load, not per step
}

OptimizerState Adafactor::state_tensors() const {
  OptimizerState state;
  for (const Slot& slot : slots_) {
    state["step." + slot.name] = slot.steps;
    if (slot.row.defined()) state["exp_avg_sq_row." + slot.name] = slot.row;
    if (slot.col.defined()) state["exp_avg_sq_col." + slot.name] = slot.col;
    if (slot.exp_avg_sq.defined()) state["exp_avg_sq." + slot.name] = slot.exp_avg_sq;
    if (slot.exp_avg.defined()) state["exp_avg." + slot.name] = slot.exp_avg;
  }
  return state;
}

}  // namespace hpctrain::optim
