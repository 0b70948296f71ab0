// Private to src/train/parallel: what every strategy (strategy.hpp) shares — the trainable parameters, the
// gradient reducer built from the Accelerator's options, zero_grad — and the factories make_strategy picks from.
#pragma once

#include <memory>
#include <vector>

#include "hpctrain/ddp/named_tensors.hpp"
#include "hpctrain/train/parallel/strategy.hpp"
#include "hpctrain/train/zero_optimizer.hpp"

namespace hpctrain::train::parallel {

class StrategyBase : public Strategy {
 public:
  explicit StrategyBase(const StrategyContext& context) : context_(context) {}
  [[nodiscard]] ddp::GradientReducer& reducer() override;
  void zero_grad() override;

 protected:
  // Collective: `model` on the device, the same structure on every rank (Error on every rank otherwise),
  // rank 0's parameters and buffers copied to every rank. `deferred`: the model's parameters are deferred (Note
  // [Deferred materialization]) and the caller materializes them alike on every rank, on the CPU; only the
  // buffers are copied. Else a deferred model is materialized first.
  void replicate(torch::nn::Module& model, bool deferred = false);
  // Collective: the gradient reducer over `trainable` (the parameters that require grad: trainable_of), with the
  // Accelerator's bucket sizes (or `buckets`: ReducerOptions::buckets), overlap and wire dtype.
  void install_reducer(ddp::NamedTensors trainable, std::vector<dist::Bucket> buckets = {});
  [[nodiscard]] static ddp::NamedTensors trainable_of(torch::nn::Module& model);
  // model_state_bytes with the whole parameters: their bytes, the reducer's gradient bytes kept between steps and
  // the optimizer's state.
  [[nodiscard]] int64_t replicated_state_bytes(const optim::Optimizer* optimizer, int64_t gradient_bytes);
  [[nodiscard]] const std::vector<at::Tensor>& trainable() const { return trainable_; }
  [[nodiscard]] dist::Comm& comm() const { return context_.comm; }
  [[nodiscard]] const AcceleratorOptions& options() const { return context_.options; }

  StrategyContext context_;

 private:
  torch::nn::Module* model_ = nullptr;  // set by replicate()
  std::vector<at::Tensor> trainable_;
  std::unique_ptr<ddp::GradientReducer> reducer_;
};

// Note [The step protocol] with sharded gradients (stages 1-3): the ranks agree on overflow through the one
// allreduce of the global sum of squares (float64, so only an inf or NaN gradient makes it non-finite), instead
// of Note [Found-inf agreement]'s replicated gradients, which no rank has; then clip and step `zero`.
void sharded_step(ZeroOptimizer& zero, double lr, double max_grad_norm, ScaleState& scale, StepOutcome& outcome);

[[nodiscard]] std::unique_ptr<Strategy> make_replicated(const StrategyContext& context);
// Stage 1 or 2 (Sharding::optimizer_state or Sharding::gradients), more than one rank.
[[nodiscard]] std::unique_ptr<Strategy> make_sharded_optimizer(const StrategyContext& context, Sharding sharding);
// Stage 3, more than one rank.
[[nodiscard]] std::unique_ptr<Strategy> make_fully_sharded(const StrategyContext& context);

}  // namespace hpctrain::train::parallel
