// ZeroOptimizer: the sharded optimizer of --zero-stage 1, 2 and 3 (Note [ZeRO slices] in
// src/dist/zero_slices.cpp). It wraps an optimizer of the chosen kind built over this rank's segments of the
// parameters, feeds it the reducer's averaged gradient slices, and after each bucket's update tells the
// ZeroShards (stages 1-2: all-gather the parameters; stage 3: nothing, the next forward gathers them).
// Checkpoints keep stage 0's layout (Note [ZeRO checkpoints]). Built by the sharded strategies
// (parallel/strategy.hpp) through Accelerator::make_optimizer; Accelerator::optimizer_step drives its step
// (Note [The step protocol]).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "hpctrain/ddp/gradient_reducer.hpp"
#include "hpctrain/dist/comm.hpp"
#include "hpctrain/optim/optimizer.hpp"

namespace hpctrain::train {

// Where a ZeroOptimizer's slices live: stages 1-2, views into the parameters laid out by the gradient reducer's
// buckets (reducer_shards); stage 3, the shards of ddp::ShardedParameters (src/train/parallel/fully_sharded.cpp).
class ZeroShards {
 public:
  virtual ~ZeroShards() = default;
  struct Segment {
    at::Tensor values;         // this rank's elements of the parameter, 1-D, updated in place
    bool reduced = false;      // false: the parameter has no gradient bucket (never gets a gradient)
    std::size_t bucket = 0;    // its gradient bucket
    int64_t slice_offset = 0;  // where its segment starts in the bucket's gradient slice
  };
  // This rank's segment of `param` (named `name`). A parameter without a bucket: its values (rank 0 the whole of
  // it, stages 1-2) or its shard segment (stage 3), with reduced false.
  [[nodiscard]] virtual Segment segment(const std::string& name, const at::Tensor& param) const = 0;
  [[nodiscard]] virtual std::size_t buckets() const = 0;
  // This rank's averaged gradient slice of every bucket, after a synced backward (GradientReducer::gradient_slices).
  [[nodiscard]] virtual std::vector<at::Tensor> gradient_slices() const = 0;
  // Collective, between steps: bucket `bucket`'s segments are updated (every rank calls it for every bucket, in the
  // same order); wait_updates() after the last one.
  virtual void bucket_updated(std::size_t bucket) = 0;
  virtual void wait_updates() = 0;
};

// Stages 1 and 2: the segments are views into the parameters (Note [ZeRO slices]), and each updated bucket's
// parameters are all-gathered (GradientReducer::start_parameter_allgather). `reducer` has ZeRO enabled.
[[nodiscard]] std::unique_ptr<ZeroShards> reducer_shards(dist::Comm& comm, ddp::GradientReducer& reducer);

// Builds the inner optimizer over segment groups; full_numels: the whole parameter's numel of each segment.
using SegmentOptimizerFactory = std::function<std::unique_ptr<optim::Optimizer>(
    std::vector<optim::ParameterGroup> groups, const std::vector<int64_t>& full_numels)>;

class ZeroOptimizer final : public optim::Optimizer {
 public:
  // Collective. `groups` are over whole parameters; `shards` (which must outlive the optimizer) says where this
  // rank's segment of each lives.
  ZeroOptimizer(dist::Comm& comm, ZeroShards& shards, std::vector<optim::ParameterGroup> groups,
                const SegmentOptimizerFactory& make);

  [[nodiscard]] std::string type() const override { return first_inner().type(); }
  [[nodiscard]] nlohmann::json hyperparameters() const override { return first_inner().hyperparameters(); }
  [[nodiscard]] int64_t state_bytes() const override;  // this rank's shard
  [[nodiscard]] optim::OptimizerState state_layout() const override;
  [[nodiscard]] std::set<std::string> non_negative_state() const override { return first_inner().non_negative_state(); }

  // Bytes of the whole state (all ranks' shards, without padding): stage 0's state_bytes().
  [[nodiscard]] int64_t whole_state_bytes() const;
  // Collective: the whole state in stage 0's layout on rank 0 (empty on the others), gathered tensor by tensor.
  [[nodiscard]] optim::OptimizerState gather_state() const;
  // Collective: state tensor `name` (a key of state_layout()) whole on rank 0, undefined on the others.
  [[nodiscard]] at::Tensor gather_state_tensor(const std::string& name) const;
  // Collective (one allreduce of one number): multiplies this rank's gradient slices by `factor` (the loss
  // scaler's 1 / scale; 1: nothing) and returns the global sum of squares of the gradients, in float64 (not
  // finite exactly when some gradient element is inf or NaN on some rank).
  [[nodiscard]] double unscaled_sum_of_squares(double factor);
  // Multiplies this rank's gradient slices by `factor` (clipping).
  void scale_gradients(double factor);

 private:
  struct Piece {  // this rank's segment of one parameter
    at::Tensor segment;         // view into the parameter, 1-D
    std::string name;           // the parameter's
    std::vector<int64_t> full_shape;
    bool reduced = false;       // false: a parameter the reducer does not reduce (no gradient)
    std::size_t bucket = 0;
    int64_t slice_offset = 0;
  };
  void update(double lr) override;
  [[nodiscard]] optim::OptimizerState state_tensors() const override;
  void copy_state(const optim::OptimizerState& state) override;
  [[nodiscard]] std::vector<int64_t> full_shape(const std::string& state_name, int64_t total) const;
  void make_pieces(const std::vector<optim::ParameterGroup>& groups);
  [[nodiscard]] std::size_t part_of(const Piece& piece) const;
  void exchange_layout();
  [[nodiscard]] const optim::Optimizer& first_inner() const;

  dist::Comm& comm_;
  ZeroShards& shards_;
  std::vector<Piece> pieces_;
  // inners_[b]: the optimizer of bucket b's segments; the last: parameters without gradients (null if none)
  std::vector<std::unique_ptr<optim::Optimizer>> inners_;
  // Every state tensor (not "step"): its numel on each rank, and its whole shape (Note [ZeRO checkpoints]).
  std::map<std::string, std::vector<int64_t>> piece_numels_;
  std::map<std::string, std::vector<int64_t>> shapes_;
};

}  // namespace hpctrain::train
