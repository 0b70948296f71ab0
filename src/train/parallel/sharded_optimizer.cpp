// The sharded-optimizer strategy (strategy.hpp): --zero-stage 1 and 2 on more than one rank. The model is
// replicated as in stage 0; the gradient reducer reduce-scatters (Note [ZeRO gradient reduction] in
// src/ddp/zero_reduce.cpp) and the ZeroOptimizer it makes keeps state for this rank's slices only, updates them
// and all-gathers the parameters (Note [ZeRO slices] in src/dist/zero_slices.cpp).
#include "hpctrain/core/error.hpp"
#include "hpctrain/core/log.hpp"
#include "hpctrain/train/zero_optimizer.hpp"
#include "strategy_base.hpp"

namespace hpctrain::train::parallel {
namespace {

class ShardedOptimizer final : public StrategyBase {
 public:
  ShardedOptimizer(const StrategyContext& context, Sharding sharding) : StrategyBase(context), sharding_(sharding) {}

  void prepare_model(torch::nn::Module& model) override {
    replicate(model);
    install_reducer(trainable_of(model));
  }

  std::unique_ptr<optim::Optimizer> make_optimizer(const optim::OptimizerOptions& options,
                                                   const optim::NamedParameters& named,
                                                   const std::set<std::string>& no_decay) override {
    std::vector<int64_t> alignments;  // Note [ZeRO slices]
    for (const at::Tensor& param : reducer().parameters()) alignments.push_back(optim::segment_alignment(options, param.numel()));
    reducer().enable_zero(stage(), alignments);
    shards_ = reducer_shards(comm(), reducer());
    auto zero = std::make_unique<ZeroOptimizer>(
        comm(), *shards_, optim::weight_decay_groups(named, options.weight_decay, no_decay),
        [&](std::vector<optim::ParameterGroup> groups, const std::vector<int64_t>& numels) {
          return optim::make_segment_optimizer(options, std::move(groups), numels);
        });
    log::info("ZeRO stage {}: this rank keeps {} of {} optimizer-state bytes", stage(), zero->state_bytes(),
              zero->whole_state_bytes());
    made_ = zero.get();
    return zero;
  }

  bool unscale_gradients(ScaleState&) override {
    fail("Accelerator::unscale_gradients with --zero-stage {}: the gradients are sharded; optimizer_step() unscales "
         "them", stage());
  }
  double clip_grad_norm(double, ScaleState&) override {
    fail("Accelerator::clip_grad_norm with --zero-stage {}: the gradients are sharded; optimizer_step(lr, "
         "max_grad_norm) clips them", stage());
  }

  void step(optim::Optimizer& optimizer, double lr, double max_grad_norm, ScaleState& scale,
            StepOutcome& outcome) override {
    sharded_step(own(optimizer), lr, max_grad_norm, scale, outcome);
  }

  void average_parameters() override {
    fail("GradientReducer::average_parameters (Local SGD) with ZeRO stage {}: not supported", stage());
  }

  // Stage 1 keeps every bucket buffer between steps (Note [ZeRO gradient reduction]), stage 2 only the slices.
  int64_t model_state_bytes(const optim::Optimizer* optimizer) override {
    int64_t gradients = 0;
    for (const at::Tensor& slice : reducer().gradient_slices()) gradients += static_cast<int64_t>(slice.nbytes());
    if (sharding_ == Sharding::optimizer_state)
      for (const at::Tensor& slice : reducer().gradient_slices())
        gradients += static_cast<int64_t>(slice.nbytes()) * comm().world_size();
    return replicated_state_bytes(optimizer, gradients);
  }

  StateToSave optimizer_state_to_save(const optim::Optimizer& optimizer) override {
    const ZeroOptimizer& zero = own(optimizer);  // Note [ZeRO checkpoints]
    return {zero.state_layout(), [&zero](const std::string& name) { return zero.gather_state_tensor(name); }};
  }

 private:
  [[nodiscard]] int stage() const { return static_cast<int>(sharding_); }

  // The registered optimizer must be the one make_optimizer built (it knows the slices).
  ZeroOptimizer& own(const optim::Optimizer& optimizer) const {
    HPCTRAIN_CHECK(made_ != nullptr && made_ == &optimizer, "Accelerator::optimizer_step with --zero-stage {}: the "
                   "registered optimizer is not sharded; build it with Accelerator::make_optimizer", stage());
    return *made_;
  }

  Sharding sharding_;
  std::unique_ptr<ZeroShards> shards_;
  ZeroOptimizer* made_ = nullptr;  // owned by the caller of make_optimizer
};

}  // namespace

std::unique_ptr<Strategy> make_sharded_optimizer(const StrategyContext& context, Sharding sharding) {
  return std::make_unique<ShardedOptimizer>(context, sharding);
}

}  // namespace hpctrain::train::parallel
