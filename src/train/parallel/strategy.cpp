// The --zero-stage parse, the refused combinations, make_strategy, and what every strategy shares
// (strategy.hpp, strategy_base.hpp).
#include "strategy_base.hpp"

#include <cmath>

#include "hpctrain/core/error.hpp"
#include "hpctrain/core/log.hpp"
#include "hpctrain/ddp/consistency.hpp"
#include "hpctrain/models/materialize.hpp"

namespace hpctrain::train::parallel {
namespace {

int64_t mib_to_bytes(double mib) { return static_cast<int64_t>(mib * 1024.0 * 1024.0); }

// Parameters and buffers by name (buffers after parameters), as prepare_model checks and broadcasts them.
ddp::NamedTensors parameters_and_buffers(torch::nn::Module& model) {
  ddp::NamedTensors named;
  for (const auto& item : model.named_parameters()) named.emplace_back(item.key(), item.value());
  for (const auto& item : model.named_buffers()) named.emplace_back("buffer:" + item.key(), item.value());
  return named;
}

}  // namespace

Sharding parse_zero_stage(int stage) {
  HPCTRAIN_CHECK(stage >= 0 && stage <= 3, "--zero-stage {}: expected 0, 1, 2 or 3", stage);
  return static_cast<Sharding>(stage);
}

void check_zero_combinations(int stage, int64_t local_sgd_steps, const std::string& optim) {
  if (parse_zero_stage(stage) == Sharding::replicated) return;
  HPCTRAIN_CHECK(local_sgd_steps == 0, "--local-sgd-steps {} with --zero-stage {} is not supported: Local SGD keeps a "
                 "whole optimizer per rank and averages parameters, ZeRO shards the optimizer over ranks that step "
                 "together\n  hint: drop one of the two options", local_sgd_steps, stage);
  // Note [ZeRO slices]: Adafactor's factored moments need whole matrices (make_segment_optimizer refuses too).
  HPCTRAIN_CHECK(optim.empty() || optim::canonical_optimizer_name(optim) != "adafactor",
                 "--optim adafactor with --zero-stage {} is not supported: Adafactor's factored second moment needs "
                 "whole matrices, and ZeRO gives each rank a slice\n  hint: use --optim adamw_torch, adamw_bnb_8bit or "
                 "sgd, or --zero-stage 0", stage);
}

std::unique_ptr<Strategy> make_strategy(const StrategyContext& context) {
  const int stage = context.options.zero_stage;
  const Sharding sharding = parse_zero_stage(stage);
  if (sharding == Sharding::replicated) return make_replicated(context);
  check_zero_combinations(stage, context.options.local_sgd_steps, "");  // the optimizer's: make_segment_optimizer
  if (context.comm.world_size() == 1) {
    log::info("--zero-stage {}: one rank, nothing to shard (runs as stage 0)", stage);
    return make_replicated(context);
  }
  if (sharding == Sharding::parameters) return make_fully_sharded(context);
  return make_sharded_optimizer(context, sharding);
}

void sharded_step(ZeroOptimizer& zero, double lr, double max_grad_norm, ScaleState& scale, StepOutcome& outcome) {
  const double squares = zero.unscaled_sum_of_squares(scale.scaler != nullptr ? 1.0 / scale.scaler->scale() : 1.0);
  scale.unscaled = scale.scaler != nullptr;
  scale.found_inf = scale.scaler != nullptr && !std::isfinite(squares);
  if (scale.found_inf) {
    outcome.result = StepOutcome::Result::skipped_overflow;
    return;
  }
  outcome.grad_norm = std::sqrt(squares);
  const double coefficient = max_grad_norm / (outcome.grad_norm + 1e-6);  // as clip_grad_norm
  if (max_grad_norm > 0 && coefficient < 1.0) zero.scale_gradients(coefficient);
  zero.step(lr);
}

ddp::GradientReducer& StrategyBase::reducer() {
  HPCTRAIN_CHECK(reducer_ != nullptr, "Accelerator: prepare_model() first");
  return *reducer_;
}

void StrategyBase::zero_grad() {
  for (at::Tensor& param : trainable_) param.mutable_grad() = at::Tensor();
}

void StrategyBase::replicate(torch::nn::Module& model, bool deferred) {
  model_ = &model;
  auto* known = dynamic_cast<models::Model*>(&model);
  if (!deferred && known != nullptr) models::materialize_all(*known);  // Note [Deferred materialization]
  if (!deferred) model.to(context_.device);
  const ddp::NamedTensors named = parameters_and_buffers(model);
  ddp::check_same_structure(comm(), named);
  std::vector<at::Tensor> tensors;
  for (const auto& [name, tensor] : named) tensors.push_back(tensor);
  if (deferred) {  // the parameters are made alike on every rank; the buffers come from rank 0 as ever
    tensors.clear();
    for (const auto& item : model.named_buffers()) tensors.push_back(item.value());
  }
  ddp::broadcast_parameters(comm(), tensors, 0);
}

ddp::NamedTensors StrategyBase::trainable_of(torch::nn::Module& model) {
  ddp::NamedTensors named;
  for (const auto& item : model.named_parameters())
    if (item.value().requires_grad()) named.emplace_back(item.key(), item.value());
  return named;
}

int64_t StrategyBase::replicated_state_bytes(const optim::Optimizer* optimizer, int64_t gradient_bytes) {
  int64_t bytes = gradient_bytes + (optimizer != nullptr ? optimizer->state_bytes() : 0);
  if (model_ != nullptr)
    for (const at::Tensor& param : model_->parameters()) bytes += static_cast<int64_t>(param.nbytes());
  return bytes;
}

void StrategyBase::install_reducer(ddp::NamedTensors named, std::vector<dist::Bucket> buckets) {
  for (const auto& [name, param] : named) trainable_.push_back(param);
  ddp::ReducerOptions reducer_options;
  reducer_options.buckets = std::move(buckets);
  reducer_options.first_bucket_bytes = mib_to_bytes(options().first_bucket_mb);
  reducer_options.bucket_bytes = mib_to_bytes(options().bucket_mb);
  reducer_options.overlap = options().overlap;
  reducer_options.wire_dtype = context_.precision.gradient_wire_dtype();
  reducer_ = std::make_unique<ddp::GradientReducer>(comm(), std::move(named), reducer_options);
}

}  // namespace hpctrain::train::parallel
