// The fully sharded strategy (strategy.hpp): --zero-stage 3 on more than one rank. Every rank keeps only its shard
// of every parameter (ddp::ShardedParameters, Note [Sharded parameters]); a unit's parameters are gathered just
// before its forward and its backward and released after them (Note [Unit gathers]); gradients are
// reduce-scattered into slices as stage 2 (the reducer's buckets are the units' groups, so a gradient slice is
// laid out as the shard it updates), and the ZeroOptimizer updates the shards in place.
#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <unordered_map>

#include "hpctrain/core/error.hpp"
#include "hpctrain/core/host_allocator.hpp"
#include "hpctrain/core/log.hpp"
#include "hpctrain/ddp/sharded_parameters.hpp"
#include "hpctrain/models/materialize.hpp"
#include "hpctrain/models/model.hpp"
#include "strategy_base.hpp"
#include "unit_map.hpp"

// Note [Unit gathers]
// The model runs its units through hooks (Note [Unit hooks] and Note [Layer runner chain] in models/model.hpp):
// the embeddings, each transformer layer (the outermost link of the chain, so gradient checkpointing's
// recomputation finds the parameters gathered) and the head. A hook gathers the units that own the parameters its
// modules read (a tied head reads the embeddings' unit) and runs the unit. Then:
//  - without a backward to come (grad mode off, or an output that needs no gradient) it releases them;
//  - else it registers a hook on the output, which runs when the output's gradient is ready, before the unit's
//    backward: it gathers the units again and prefetches the units of the call before it in this forward (the
//    next in backward), and a hook on the input, which runs once the input's gradient is complete, after the
//    unit's backward: it releases them. With --zero-reshard-after-forward true (the default) the units are
//    released after forward and gathered again for backward (1.5x stage 0's bytes on the wire, docs/zero.md);
//    false keeps them from forward to backward.
// A unit that more than one hook gathers (a tied head's: the embeddings' unit, read by the embeddings and the head)
// is kept from its first gather in a forward that a backward follows to the end of that backward, whatever
// --zero-reshard-after-forward says: gathered once per micro-batch instead of four times (FSDP keeps its root unit
// so), at the cost of holding it through the step; without a backward to come it is released as any unit.
// Each forward prefetches the units of the next call of the previous forward while this one computes. The
// parameters outside every unit (final norms) form the unit "rest", gathered by the first hook and kept until the
// optimizer step changes the shards. Units that no input hook released (the embeddings, whose input is token ids;
// a first layer whose input needs no gradient) are released after backward (after_backward). Every rank runs the
// same hooks in the same order (the same model, the same autograd graph), so the all-gathers match.
// Testing aid: HPCTRAIN_TEST_STOP_IN_GATHER=RANK:CALL makes that rank stop itself (SIGSTOP) at its CALL-th hook
// (1-based, counted over the run), before the gather: the other ranks then wait in that unit's all-gather until the
// collective timeout names the missing rank and the unit (Note [Collective timeout]).
namespace hpctrain::train::parallel {
namespace {

using models::UnitKind;

// HPCTRAIN_TEST_STOP_IN_GATHER (Note [Unit gathers]): the hook call at which this rank stops; 0: never.
int64_t test_stop_call(int rank) {
  const char* text = std::getenv("HPCTRAIN_TEST_STOP_IN_GATHER");
  if (text == nullptr || *text == '\0') return 0;
  int stop_rank = 0;
  long long call = 0;
  char tail = 0;
  HPCTRAIN_CHECK(std::sscanf(text, "%d:%lld%c", &stop_rank, &call, &tail) == 2 && call >= 1,
                 "HPCTRAIN_TEST_STOP_IN_GATHER '{}': expected RANK:CALL (call >= 1)", text);
  return stop_rank == rank ? call : 0;
}

// The hooks of Note [Unit gathers].
class UnitGathers {
 public:
  UnitGathers(ddp::ShardedParameters& sharded, UnitMap map, bool reshard_after_forward, int rank)
      : sharded_(sharded), map_(std::move(map)), reshard_after_forward_(reshard_after_forward),
        stop_at_(test_stop_call(rank)) {}

  at::Tensor run(const std::vector<std::size_t>& units, bool starts_forward, const at::Tensor& input,
                 const models::UnitBody& body) {
    if (++hook_calls_ == stop_at_) std::raise(SIGSTOP);  // testing aid (Note [Unit gathers])
    if (starts_forward) {
      previous_calls_ = std::move(calls_);
      calls_.clear();
    }
    if (map_.rest != kNoUnit) sharded_.gather(map_.rest);
    for (std::size_t unit : units) sharded_.gather(unit);
    const std::size_t call = calls_.size();
    calls_.push_back(units);
    if (call + 1 < previous_calls_.size())
      for (std::size_t unit : previous_calls_[call + 1]) sharded_.prefetch(unit);
    at::Tensor output = body(input);
    const bool backward_comes = at::GradMode::is_enabled() && output.requires_grad();
    if (!backward_comes) {
      release(units);
      return output;
    }
    if (reshard_after_forward_) release_unkept(units);
    output.register_hook([this, call](const at::TensorBase&) { before_backward(call); });
    if (input.requires_grad())
      input.register_hook([this, call](const at::TensorBase&) { release_unkept(calls_.at(call)); });
    return output;
  }

  at::Tensor run_layer(models::TransformerLayer& layer, const at::Tensor& hidden, const models::LayerContext& context,
                       const models::LayerRunner& next) {
    const auto found = map_.layer_unit.find(&layer);
    if (found == map_.layer_unit.end()) return next(layer, hidden, context);  // a layer without parameters
    return run({found->second}, false, hidden, [&](const at::Tensor& input) { return next(layer, input, context); });
  }

  at::Tensor run_unit(UnitKind kind, const at::Tensor& input, const models::UnitBody& body) {
    return run(kind == UnitKind::embeddings ? map_.embeddings : map_.head, kind == UnitKind::embeddings, input, body);
  }

  // Units that no input hook released; `rest` stays until the step changes the shards.
  void after_backward() {
    for (std::size_t unit = 0; unit < sharded_.num_units(); ++unit)
      if (unit != map_.rest) sharded_.release(unit);
  }

  [[nodiscard]] const UnitMap& map() const { return map_; }

 private:
  void release(const std::vector<std::size_t>& units) {
    for (std::size_t unit : units) sharded_.release(unit);
  }
  // Between a forward and the end of its backward: the kept units stay (Note [Unit gathers]).
  void release_unkept(const std::vector<std::size_t>& units) {
    for (std::size_t unit : units)
      if (std::find(map_.kept.begin(), map_.kept.end(), unit) == map_.kept.end()) sharded_.release(unit);
  }

  void before_backward(std::size_t call) {
    for (std::size_t unit : calls_.at(call)) sharded_.gather(unit);
    if (call > 0)
      for (std::size_t unit : calls_[call - 1]) sharded_.prefetch(unit);
  }

  ddp::ShardedParameters& sharded_;
  UnitMap map_;
  bool reshard_after_forward_;
  std::vector<std::vector<std::size_t>> calls_, previous_calls_;  // the units of each hook call of a forward
  int64_t hook_calls_ = 0, stop_at_ = 0;
};

// ZeroOptimizer's segments are the shards; the reducer's bucket b reduces trainable group groups_of_bucket[b].
class UnitShards final : public ZeroShards {
 public:
  UnitShards(ddp::ShardedParameters& sharded, ddp::GradientReducer& reducer, std::vector<std::size_t> bucket_of_group)
      : sharded_(sharded), reducer_(reducer), bucket_of_group_(std::move(bucket_of_group)) {
    const auto& parameters = sharded.parameters();
    for (std::size_t i = 0; i < parameters.size(); ++i) index_.emplace(parameters[i].tensor.unsafeGetTensorImpl(), i);
  }

  Segment segment(const std::string& name, const at::Tensor& param) const override {
    const auto found = index_.find(param.unsafeGetTensorImpl());
    HPCTRAIN_CHECK(found != index_.end(), "--zero-stage 3: the optimizer's parameter '{}' is not one of the prepared "
                   "model's", name);
    const ddp::ShardedParameters::Parameter& p = sharded_.parameters()[found->second];
    Segment out;
    out.values = sharded_.segment(found->second);
    out.reduced = sharded_.groups()[p.group].trainable;
    out.bucket = out.reduced ? bucket_of_group_[p.group] : 0;
    out.slice_offset = p.segment.slice_offset;
    return out;
  }
  std::size_t buckets() const override { return reducer_.buckets().size(); }
  std::vector<at::Tensor> gradient_slices() const override { return reducer_.gradient_slices(); }
  void bucket_updated(std::size_t) override {}  // the next forward gathers the updated shards
  void wait_updates() override {}

 private:
  ddp::ShardedParameters& sharded_;
  ddp::GradientReducer& reducer_;
  std::vector<std::size_t> bucket_of_group_;
  std::unordered_map<const void*, std::size_t> index_;
};

class FullySharded final : public StrategyBase {
 public:
  using StrategyBase::StrategyBase;

  void prepare_model(torch::nn::Module& module) override {
    auto* model = dynamic_cast<models::Model*>(&module);
    HPCTRAIN_CHECK(model != nullptr, "--zero-stage 3: the model must be an hpctrain model (models::Model) with "
                   "transformer layers; got {}\n  hint: use --zero-stage 2", module.name());
    // Note [Deferred materialization]: a deferred model's units are materialized one at a time, each taken into
    // the shards and freed before the next (on the CPU; a device gets the whole model first).
    const bool deferred = model->deferred_seed().has_value() && context_.device.is_cpu();
    replicate(module, deferred);
    UnitMap map = plan_units(*model);
    ddp::ShardedParametersOptions sharding;
    sharding.overlap = options().overlap;
    if (deferred)
      sharding.before_unit = [model](const ddp::NamedTensors& parameters) {
        std::vector<std::string> names;
        for (const auto& [name, param] : parameters) names.push_back(name);
        models::materialize(*model, names);
      };
    sharded_ = std::make_unique<ddp::ShardedParameters>(comm(), map.units, optim::any_segment_alignment, sharding);
    if (deferred) model->set_deferred_seed(std::nullopt);
    install_unit_reducer(map);
    gathers_ = std::make_unique<UnitGathers>(*sharded_, std::move(map), options().zero_reshard_after_forward,
                                             comm().rank());
    model->set_layer_link(models::LayerLinkPlace::parameter_gather,
                          [this](models::TransformerLayer& layer, const at::Tensor& hidden,
                                 const models::LayerContext& context, const models::LayerRunner& next) {
                            return gathers_->run_layer(layer, hidden, context, next);
                          });
    model->set_unit_runner([this](UnitKind kind, const at::Tensor& input, const models::UnitBody& body) {
      return gathers_->run_unit(kind, input, body);
    });
    log::info("ZeRO stage 3: {} units; this rank keeps {} of {} parameter bytes", sharded_->num_units(),
              sharded_->shard_bytes(), sharded_->gathered_bytes());
  }

  std::unique_ptr<optim::Optimizer> make_optimizer(const optim::OptimizerOptions& options,
                                                   const optim::NamedParameters& named,
                                                   const std::set<std::string>& no_decay) override {
    auto zero = std::make_unique<ZeroOptimizer>(
        comm(), *shards_, optim::weight_decay_groups(named, options.weight_decay, no_decay),
        [&](std::vector<optim::ParameterGroup> groups, const std::vector<int64_t>& numels) {
          return optim::make_segment_optimizer(options, std::move(groups), numels);
        });
    log::info("ZeRO stage 3: this rank keeps {} of {} optimizer-state bytes", zero->state_bytes(),
              zero->whole_state_bytes());
    made_ = zero.get();
    return zero;
  }

  bool unscale_gradients(ScaleState&) override {
    fail("Accelerator::unscale_gradients with --zero-stage 3: the gradients are sharded; optimizer_step() unscales them");
  }
  double clip_grad_norm(double, ScaleState&) override {
    fail("Accelerator::clip_grad_norm with --zero-stage 3: the gradients are sharded; optimizer_step(lr, "
         "max_grad_norm) clips them");
  }

  void step(optim::Optimizer& optimizer, double lr, double max_grad_norm, ScaleState& scale,
            StepOutcome& outcome) override {
    HPCTRAIN_CHECK(made_ != nullptr && made_ == &optimizer, "Accelerator::optimizer_step with --zero-stage 3: the "
                   "registered optimizer is not sharded; build it with Accelerator::make_optimizer");
    sharded_step(*made_, lr, max_grad_norm, scale, outcome);
    sharded_->release_all();  // the shards changed: every unit is gathered anew
  }

  void after_backward() override { gathers_->after_backward(); }

  void average_parameters() override {
    fail("GradientReducer::average_parameters (Local SGD) with ZeRO stage 3: not supported");
  }

  StateToSave optimizer_state_to_save(const optim::Optimizer& optimizer) override {
    HPCTRAIN_CHECK(made_ == &optimizer, "--zero-stage 3: the registered optimizer is not sharded");
    const ZeroOptimizer& zero = *made_;  // Note [ZeRO checkpoints]
    return {zero.state_layout(), [&zero](const std::string& name) { return zero.gather_state_tensor(name); }};
  }

  void with_whole_model(const std::function<void()>& use, bool keep_changes) override {
    for (std::size_t unit = 0; unit < sharded_->num_units(); ++unit) sharded_->gather(unit);
    use();
    if (keep_changes) sharded_->keep_gathered_values();
    sharded_->release_all();
  }

  // Note [Streamed writes]: one unit gathered at a time (the one holding `tensor`); tensors outside every unit
  // (buffers) are whole already.
  void make_whole(const at::Tensor& tensor) override {
    if (unit_of_storage_.empty())
      for (const auto& p : sharded_->parameters())
        unit_of_storage_.emplace(p.tensor.storage().unsafeGetStorageImpl(), sharded_->groups()[p.group].unit);
    const auto found = unit_of_storage_.find(tensor.storage().unsafeGetStorageImpl());
    if (found == unit_of_storage_.end() || found->second == whole_unit_) return;
    if (whole_unit_ != kNoUnit) sharded_->release(whole_unit_);
    whole_unit_ = found->second;
    sharded_->gather(whole_unit_);
  }
  void end_whole_tensors() override {
    sharded_->release_all();
    whole_unit_ = kNoUnit;
  }

  int64_t model_state_bytes(const optim::Optimizer* optimizer) override {
    int64_t bytes = sharded_->shard_bytes();
    for (const at::Tensor& slice : reducer().gradient_slices()) bytes += static_cast<int64_t>(slice.nbytes());
    return bytes + (optimizer != nullptr ? optimizer->state_bytes() : 0);
  }

 private:
  // The reducer over the trainable groups, one bucket each, in backward order, laid out as the groups
  // (Note [Sharded parameters]), reduce-scattering as stage 2.
  void install_unit_reducer(const UnitMap& map) {
    const auto& groups = sharded_->groups();
    const auto& parameters = sharded_->parameters();
    ddp::NamedTensors named;
    std::vector<dist::Bucket> buckets;
    std::vector<int64_t> alignments;
    std::vector<std::size_t> bucket_of_group(groups.size(), 0);
    for (std::size_t unit : map.backward_order) {
      for (std::size_t g = 0; g < groups.size(); ++g) {
        if (groups[g].unit != unit || !groups[g].trainable) continue;
        bucket_of_group[g] = buckets.size();
        dist::Bucket bucket;
        for (std::size_t member : groups[g].members) {
          bucket.push_back(named.size());
          named.emplace_back(parameters[member].name, parameters[member].tensor);
          alignments.push_back(optim::any_segment_alignment(parameters[member].tensor.numel()));
        }
        buckets.push_back(std::move(bucket));
      }
    }
    HPCTRAIN_CHECK(!named.empty(), "--zero-stage 3: no parameter trains");
    install_reducer(std::move(named), std::move(buckets));
    reducer().enable_zero(2, alignments);
    check_same_layout(bucket_of_group);
    shards_ = std::make_unique<UnitShards>(*sharded_, reducer(), std::move(bucket_of_group));
  }

  // The reducer's slices must be the groups' shards, element for element (one layout function, two callers).
  void check_same_layout(const std::vector<std::size_t>& bucket_of_group) {
    const std::vector<at::Tensor> reduced = reducer().parameters();
    std::unordered_map<const void*, std::size_t> index;
    for (std::size_t i = 0; i < reduced.size(); ++i) index.emplace(reduced[i].unsafeGetTensorImpl(), i);
    for (const auto& p : sharded_->parameters()) {
      const auto found = index.find(p.tensor.unsafeGetTensorImpl());
      if (found == index.end()) continue;
      const ddp::GradientReducer::Shard& shard = reducer().shards()[found->second];
      HPCTRAIN_CHECK(shard.bucket == bucket_of_group[p.group] && shard.segment.begin == p.segment.begin &&
                     shard.segment.end == p.segment.end && shard.segment.slice_offset == p.segment.slice_offset,
                     "--zero-stage 3: parameter '{}' has another layout in its gradient bucket than in its shard", p.name);
    }
  }

  // At stage 3 the resident set follows the live tensors (glibc's defaults, Note [Host allocator]): a unit's
  // buffers are freed after every forward and backward, and the tuned heap keeps each thread's freed memory for
  // that thread alone (on 4 ranks of a 52 M parameter GPT-2 the peak resident set was 1.35-1.63 GiB per rank with
  // the tuning, above stage 0's 1.25 GiB, and 0.73-0.83 GiB without it).
  core::LiveTensorResidency residency_;
  std::unique_ptr<ddp::ShardedParameters> sharded_;
  std::unique_ptr<UnitGathers> gathers_;
  std::unique_ptr<UnitShards> shards_;
  ZeroOptimizer* made_ = nullptr;  // owned by the caller of make_optimizer
  std::unordered_map<const void*, std::size_t> unit_of_storage_;  // a unit's buffers' storage -> the unit
  std::size_t whole_unit_ = kNoUnit;                                // gathered by make_whole
};

}  // namespace

std::unique_ptr<Strategy> make_fully_sharded(const StrategyContext& context) {
  return std::make_unique<FullySharded>(context);
}

}  // namespace hpctrain::train::parallel
