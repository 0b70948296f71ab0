// ZeroOptimizer: ZeRO stages 1 and 2's optimizer (--zero-stage, Note [ZeRO slices] in
// src/dist/zero_slices.cpp). It wraps an optimizer of the chosen kind built over this rank's segments of the
// parameters (views into them), feeds it the reducer's averaged gradient slices, and after each update
// all-gathers the parameters. Checkpoints keep stage 0's layout (Note [ZeRO checkpoints]). Built by
// Accelerator::make_optimizer; Accelerator::optimizer_step drives its step (Note [The step protocol]).
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

// Builds the inner optimizer over segment groups; full_numels: the whole parameter's numel of each segment.
using SegmentOptimizerFactory = std::function<std::unique_ptr<optim::Optimizer>(
    std::vector<optim::ParameterGroup> groups, const std::vector<int64_t>& full_numels)>;

class ZeroOptimizer final : public optim::Optimizer {
 public:
  // Collective. `reducer` has ZeRO enabled (GradientReducer::enable_zero); `groups` are over whole
  // parameters (a parameter the reducer does not reduce, a frozen one, is owned whole by rank 0).
  ZeroOptimizer(dist::Comm& comm, ddp::GradientReducer& reducer, std::vector<optim::ParameterGroup> groups,
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
  ddp::GradientReducer& reducer_;
  std::vector<Piece> pieces_;
  // inners_[b]: the optimizer of bucket b's segments; the last: parameters without gradients (null if none)
  std::vector<std::unique_ptr<optim::Optimizer>> inners_;
  // Every state tensor (not "step"): its numel on each rank, and its whole shape (Note [ZeRO checkpoints]).
  std::map<std::string, std::vector<int64_t>> piece_numels_;
  std::map<std::string, std::vector<int64_t>> shapes_;
};

}  // namespace hpctrain::train
