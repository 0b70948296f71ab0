// The replicated strategy (strategy.hpp): --zero-stage 0 and Local SGD. Every rank holds the whole model,
// its averaged gradients and the whole optimizer state; the step reads the found-inf flag from the averaged
// gradients (Note [Found-inf agreement]) and clips them as
// torch.nn.utils.clip_grad_norm_.
#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <cmath>

#include "hpctrain/core/log.hpp"
#include "../sum_of_squares.hpp"
#include "strategy_base.hpp"

// Note [Found-inf agreement]
// A step is skipped on every rank or on none, yet found_inf costs no collective of its own: it is read
// from the averaged gradients, after the reducer's allreduce. A rank's inf or NaN makes the sum inf or
// NaN on every rank whatever the summation order (inf + finite = inf, inf - inf = NaN, NaN + x = NaN;
// row-sparse buckets count NaN as non-zero, Note [Row-sparse buckets]), and every rank receives the
// same averaged bits (the replicas stay equal, which --check-sync-every verifies), so every rank reads
// the same flag. Gradients that were never reduced (a step with sync off) would break this: the trainer
// unscales only after a synced micro-batch. Local SGD without a gradient allreduce needs the flag in its
// own reduction.
namespace hpctrain::train::parallel {
namespace {

class Replicated final : public StrategyBase {
 public:
  using StrategyBase::StrategyBase;

  void prepare_model(torch::nn::Module& model) override {
    replicate(model);
    install_reducer(trainable_of(model));
    if (options().local_sgd_steps > 0) reducer().set_sync(false);  // Note [Local SGD]: no gradient averaging
  }

  std::unique_ptr<optim::Optimizer> make_optimizer(const optim::OptimizerOptions& options,
                                                   const optim::NamedParameters& named,
                                                   const std::set<std::string>& no_decay) override {
    return optim::make_optimizer(options, named, no_decay);
  }

  bool unscale_gradients(ScaleState& scale) override {
    if (scale.scaler == nullptr || scale.unscaled) return scale.found_inf;
    at::NoGradGuard no_grad;
    const double inverse = 1.0 / scale.scaler->scale();
    std::vector<at::Tensor> nonfinite;
    for (const at::Tensor& param : trainable()) {
      if (!param.grad().defined()) continue;
      at::Tensor grad = param.grad();
      grad.mul_(inverse);
      nonfinite.push_back(at::isfinite(grad).logical_not().any());
    }
    scale.found_inf = !nonfinite.empty() && at::stack(nonfinite).any().item<bool>();
    scale.unscaled = true;
    return scale.found_inf;
  }

  double clip_grad_norm(double max_norm, ScaleState& scale) override {
    (void)unscale_gradients(scale);  // clipping sees unscaled gradients (Accelerate's clip_grad_norm_)
    at::NoGradGuard no_grad;
    at::Tensor squares;  // float64, Note [Gradient norm in float64]
    for (const at::Tensor& param : trainable()) {
      if (param.grad().defined()) detail::add_sum_of_squares(squares, param.grad());
    }
    if (!squares.defined()) return 0.0;
    const double total = std::sqrt(squares.item<double>());
    // torch.nn.utils.clip_grad_norm_: scale by max_norm / (total + 1e-6) when that is below 1.
    const double coefficient = max_norm / (total + 1e-6);
    if (max_norm > 0 && coefficient < 1.0) {
      for (const at::Tensor& param : trainable()) {
        if (param.grad().defined()) param.grad().mul_(coefficient);
      }
    }
    return total;
  }

  void step(optim::Optimizer& optimizer, double lr, double max_grad_norm, ScaleState& scale,
            StepOutcome& outcome) override {
    if (unscale_gradients(scale)) {  // Note [Found-inf agreement]: the same on every rank
      outcome.result = StepOutcome::Result::skipped_overflow;
      return;
    }
    outcome.grad_norm = clip_grad_norm(max_grad_norm, scale);
    optimizer.step(lr);
  }

  void average_parameters() override { reducer().average_parameters(); }

  int64_t model_state_bytes(const optim::Optimizer* optimizer) override {
    int64_t gradients = 0;  // the .grad views of the reducer's buckets (Note [Gradients as bucket views])
    for (const at::Tensor& param : trainable()) gradients += static_cast<int64_t>(param.nbytes());
    return replicated_state_bytes(optimizer, gradients);
  }

  StateToSave optimizer_state_to_save(const optim::Optimizer& optimizer) override {
    auto state = std::make_shared<const optim::OptimizerState>(optimizer.state_dict());  // whole on every rank
    return {*state, [state](const std::string& name) { return state->at(name); }};
  }
};

}  // namespace

std::unique_ptr<Strategy> make_replicated(const StrategyContext& context) {
  return std::make_unique<Replicated>(context);
}

}  // namespace hpctrain::train::parallel
