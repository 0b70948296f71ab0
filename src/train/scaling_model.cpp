// scaling_model.hpp: the predicted data-parallel step (Note [Overlap model]) and the reducer's bucket sizes.
#include "hpctrain/train/scaling_model.hpp"

#include <algorithm>
#include <numeric>

#include "hpctrain/core/error.hpp"
#include "hpctrain/dist/buckets.hpp"

namespace hpctrain::train {

namespace {

// The end of the last bucket's reduction on the communication thread (Note [Overlap model]); adds each
// reduction's time to p.comm_s. `ring_share`: 1 for an allreduce, 1/2 for ZeRO's reduce-scatter.
double reductions_end(const ScalingInputs& in, int ranks, double ring_share, StepPrediction& p) {
  const double total_bytes = static_cast<double>(std::accumulate(in.bucket_bytes.begin(), in.bucket_bytes.end(), int64_t{0}));
  const double backward_end = in.step.forward_s + in.step.backward_s;
  double ready_bytes = 0, comm_end = 0;
  for (const int64_t bytes : in.bucket_bytes) {
    ready_bytes += static_cast<double>(bytes);
    const double ready = in.overlap && total_bytes > 0
                             ? in.step.forward_s + in.step.backward_s * ready_bytes / total_bytes
                             : backward_end;
    const double cost = ring_share * dist::ring_allreduce_seconds(in.network, bytes, ranks);
    p.comm_s += cost;
    comm_end = std::max(comm_end, ready) + cost;
  }
  return comm_end;
}

// Note [ZeRO step model]: the norm's allreduce and the parameter all-gathers, after the sharded update.
double zero_tail(const ScalingInputs& in, int ranks, StepPrediction& p) {
  const double norm = dist::ring_allreduce_seconds(in.network, sizeof(double), ranks);
  for (const int64_t bytes : in.bucket_bytes) p.allgather_s += dist::ring_allreduce_seconds(in.network, bytes, ranks) / 2;
  p.comm_s += norm + p.allgather_s;
  return norm + p.allgather_s;
}

}  // namespace

StepPrediction predict_step(const ScalingInputs& in, int ranks) {
  HPCTRAIN_CHECK(ranks >= 1, "scaling model: ranks must be at least 1, got {}", ranks);
  HPCTRAIN_CHECK(in.zero_stage >= 0 && in.zero_stage <= 2, "scaling model: --zero-stage {}: expected 0, 1 or 2",
                 in.zero_stage);
  const bool zero = in.zero_stage > 0 && ranks > 1;  // one rank: stage 0 (nothing to shard)
  StepPrediction p;
  p.ranks = ranks;
  const double comm_end = reductions_end(in, ranks, zero ? 0.5 : 1.0, p);
  p.optimizer_s = zero ? in.step.optimizer_s / ranks : in.step.optimizer_s;
  const double tail = zero ? zero_tail(in, ranks, p) : 0.0;
  const double backward_end = in.step.forward_s + in.step.backward_s;
  p.step_s = std::max(backward_end, comm_end) + p.optimizer_s + tail;
  p.exposed_comm_s = p.step_s - backward_end - p.optimizer_s;
  p.efficiency = p.step_s > 0 ? in.step.total() / p.step_s : 1;
  return p;
}

std::vector<int64_t> gradient_bucket_bytes(const ParameterShapes& shapes) {
  std::vector<int64_t> sizes;
  for (const auto& [name, shape] : shapes)
    sizes.push_back(4 * std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<>()));
  std::vector<int64_t> out;
  for (const dist::Bucket& bucket : dist::assign_buckets(sizes)) {
    int64_t bytes = 0;
    for (const std::size_t index : bucket) bytes += sizes[index];
    out.push_back(bytes);
  }
  return out;
}

}  // namespace hpctrain::train
