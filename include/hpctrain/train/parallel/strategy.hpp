// The parallelism strategy behind the Accelerator (--zero-stage): how the ranks hold the model, its gradients
// and the optimizer's state, and what one optimizer step does with them. One implementation per file in
// src/train/parallel/:
//   replicated.cpp         stage 0 (and Local SGD): every rank holds everything, gradients allreduced;
//   sharded_optimizer.cpp  stages 1 and 2: optimizer state (and gradients) sharded, parameters all-gathered
//                          after each update (ZeroOptimizer, zero_optimizer.hpp);
//   fully_sharded.cpp      stage 3: parameters sharded too, gathered unit by unit around their use.
// The Accelerator owns one (make_strategy) and never branches on the stage: preparing the model, making the
// optimizer, the step (Note [The step protocol] in accelerator.hpp) and the checkpoint's optimizer state go
// through this interface. --zero-stage is parsed once, by parse_zero_stage.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <torch/nn/module.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "hpctrain/ddp/gradient_reducer.hpp"
#include "hpctrain/dist/comm.hpp"
#include "hpctrain/optim/optimizer.hpp"
#include "hpctrain/train/accelerator_options.hpp"
#include "hpctrain/train/precision.hpp"

namespace hpctrain::train {

// What Accelerator::optimizer_step did (Note [The step protocol]).
struct StepOutcome {
  enum class Result {
    stepped,
    skipped_overflow,        // loss scaling: the unscaled gradients held inf/NaN on some rank; the scale shrank
    skipped_nonfinite_loss,  // skip_step(): every rank agreed to skip (a non-finite loss, --skip-nonfinite)
  };
  Result result = Result::stepped;
  double grad_norm = 0;              // global L2 norm of the gradients before clipping; 0 when skipped
  double lr = 0;                     // the learning rate the step used (or would have used)
  std::optional<double> loss_scale;  // after this step's scaler update; nullopt without loss scaling
  [[nodiscard]] bool stepped() const { return result == Result::stepped; }
};

namespace parallel {

// What --zero-stage shards (DeepSpeed's stages).
enum class Sharding {
  replicated = 0,       // stage 0: nothing
  optimizer_state = 1,  // stage 1
  gradients = 2,        // stage 2: optimizer state and gradients
  parameters = 3,       // stage 3: optimizer state, gradients and parameters
};

// --zero-stage, parsed once: Error naming the option unless 0, 1, 2 or 3.
[[nodiscard]] Sharding parse_zero_stage(int stage);
// The combinations no sharded strategy supports, refused naming both options: Local SGD (local_sgd_steps > 0)
// and Adafactor (`optim`, an --optim name or alias; empty: not checked).
void check_zero_combinations(int stage, int64_t local_sgd_steps, const std::string& optim);

// The loss scaler's part of one step (Note [Found-inf agreement] in src/train/parallel/replicated.cpp): whether
// this step's gradients were divided by the scale yet, and whether some rank's were not finite.
struct ScaleState {
  const DynamicLossScaler* scaler = nullptr;  // null without loss scaling
  bool unscaled = false;
  bool found_inf = false;
};

// What a strategy works with; the Accelerator that owns the strategy outlives it.
struct StrategyContext {
  dist::Comm& comm;
  const AcceleratorOptions& options;
  const PrecisionPolicy& precision;
  at::Device device;
};

class Strategy {
 public:
  virtual ~Strategy() = default;

  // Collective, once: `model` on the device, checked to have the same structure on every rank, rank 0's
  // values on every rank (or each rank's shard of them), the gradient reducer on the trainable parameters.
  virtual void prepare_model(torch::nn::Module& model) = 0;
  [[nodiscard]] virtual ddp::GradientReducer& reducer() = 0;

  // Collective, after prepare_model: the optimizer options.optim names over `named`, grouped by
  // weight_decay_groups(named, options.weight_decay, no_decay) (Note [Weight decay groups]).
  [[nodiscard]] virtual std::unique_ptr<optim::Optimizer> make_optimizer(const optim::OptimizerOptions& options,
                                                                         const optim::NamedParameters& named,
                                                                         const std::set<std::string>& no_decay) = 0;

  // Custom loops (Accelerator::unscale_gradients, clip_grad_norm): divide the averaged gradients by the scale
  // once per step and say whether any is inf/NaN; clip them to max_norm (<= 0: measure) and return the norm
  // before clipping. A strategy whose gradients are sharded refuses both (its step does them).
  [[nodiscard]] virtual bool unscale_gradients(ScaleState& scale) = 0;
  [[nodiscard]] virtual double clip_grad_norm(double max_norm, ScaleState& scale) = 0;

  // Note [The step protocol] up to the optimizer's update: unscale, agree on overflow, clip, `optimizer`'s
  // step(lr) (and what makes the parameters whole again). Sets outcome.result and outcome.grad_norm; the
  // caller updates the scaler and drops the gradients. Collective.
  virtual void step(optim::Optimizer& optimizer, double lr, double max_grad_norm, ScaleState& scale,
                    StepOutcome& outcome) = 0;
  // Sets every trainable parameter's gradient to none.
  virtual void zero_grad() = 0;
  // After every backward (Accelerator::backward), before the gradients are averaged.
  virtual void after_backward() {}

  // Collective. Local SGD (Note [Local SGD] in src/ddp/gradient_reducer.cpp): every parameter replaced by its
  // average over the ranks. Only the replicated strategy has it.
  virtual void average_parameters() = 0;

  // The state a checkpoint writes as optimizer.safetensors, in stage 0's layout (Note [ZeRO checkpoints] in
  // src/train/zero_optimizer.cpp), one tensor at a time (Note [Streamed writes] in src/train/streamed_save.cpp):
  // `layout` names every tensor with its whole shape and dtype, on every rank; fetch(name), collective, gives it
  // whole on rank 0 (undefined on the others). Every rank fetches the same names in the same order.
  struct StateToSave {
    optim::OptimizerState layout;
    std::function<at::Tensor(const std::string& name)> fetch;
  };
  [[nodiscard]] virtual StateToSave optimizer_state_to_save(const optim::Optimizer& optimizer) = 0;

  // Collective: runs `use` while every parameter of the prepared model holds its whole value on every rank (stage
  // 3 gathers every unit before and releases them after); with `keep_changes` the values `use` wrote stay the
  // model's (stage 3 copies each rank's part back into its shards; they must be the same on every rank).
  virtual void with_whole_model(const std::function<void()>& use, bool keep_changes) {
    (void)keep_changes;
    use();
  }

  // Collective (Note [Streamed writes]): `tensor`, a parameter of the prepared model or a view of one, holds its
  // whole value on every rank until the next call or end_whole_tensors(): stage 3 gathers the unit that holds it
  // and releases the unit the call before gathered, so a rank holds one unit beside its shards. Every rank makes
  // the same calls in the same order. Nothing to do where the parameters are whole.
  virtual void make_whole(const at::Tensor& tensor) { (void)tensor; }
  virtual void end_whole_tensors() {}

  // Bytes this rank holds of the model's parameters, their gradients between steps and `optimizer`'s state (null:
  // none): metrics.jsonl's model_state_bytes.
  [[nodiscard]] virtual int64_t model_state_bytes(const optim::Optimizer* optimizer) = 0;
};

// The strategy --zero-stage names (context.options.zero_stage); stages above 0 on one rank run as stage 0
// (logged). Not collective.
[[nodiscard]] std::unique_ptr<Strategy> make_strategy(const StrategyContext& context);

}  // namespace parallel
}  // namespace hpctrain::train
