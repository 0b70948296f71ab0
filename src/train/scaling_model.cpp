// scaling_model.hpp: the predicted data-parallel step (Note [Overlap model]) and the reducer's bucket sizes.
#include "hpctrain/train/scaling_model.hpp"

#include <algorithm>
#include <functional>
#include <numeric>

#include "hpctrain/core/error.hpp"
#include "hpctrain/dist/buckets.hpp"
#include "hpctrain/train/parallel/strategy.hpp"
#include "hpctrain/train/parallel/units.hpp"

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

// One communication thread that runs collectives in the order they are issued (Note [ZeRO-3 step model]).
struct CommTimeline {
  double free = 0;  // when the thread finishes the last collective issued so far
  double issue(double ready, double cost) {
    free = std::max(free, ready) + cost;
    return free;
  }
};

// Note [ZeRO-3 step model]: the units computed in `order`, each after its all-gather (when `gather`, and in backward
// not for a kept unit), the next one's all-gather issued when a unit starts, each unit's reduce-scatter issued when it
// ends (when `reduce`). Returns the end of the last unit's computation.
double zero3_pass(const ScalingInputs& in, int ranks, const std::vector<std::size_t>& order, double start,
                  double seconds, bool gather, bool reduce, CommTimeline& link, StepPrediction& p) {
  const double total = static_cast<double>(std::accumulate(in.unit_bytes.begin(), in.unit_bytes.end(), int64_t{0}));
  const auto half_ring = [&](std::size_t unit) {
    return dist::ring_allreduce_seconds(in.network, in.unit_bytes[unit], ranks) / 2;
  };
  std::vector<double> gathered(order.size(), start);
  const auto issue_gather = [&](std::size_t i, double ready) {
    const bool kept = order[i] < in.unit_kept.size() && in.unit_kept[order[i]];
    if (kept && reduce) return;  // gathered in forward, kept to the end of backward
    const double cost = half_ring(order[i]);
    p.allgather_s += cost, p.comm_s += cost;
    gathered[i] = link.issue(ready, cost);
  };
  if (gather) issue_gather(0, start);
  double compute_end = start;
  for (std::size_t i = 0; i < order.size(); ++i) {
    const double begin = std::max(compute_end, gathered[i]);
    if (gather && i + 1 < order.size()) issue_gather(i + 1, begin);  // the prefetch
    compute_end = begin + seconds * static_cast<double>(in.unit_bytes[order[i]]) / std::max(total, 1.0);
    if (reduce) {
      const double cost = half_ring(order[i]);
      p.comm_s += cost;
      link.issue(compute_end, cost);
    }
  }
  return compute_end;
}

StepPrediction predict_zero3(const ScalingInputs& in, int ranks) {
  HPCTRAIN_CHECK(!in.unit_bytes.empty(), "scaling model: --zero-stage 3 needs the model's units");
  StepPrediction p;
  p.ranks = ranks;
  std::vector<std::size_t> forward(in.unit_bytes.size()), backward;
  std::iota(forward.begin(), forward.end(), std::size_t{0});
  backward.assign(forward.rbegin(), forward.rend());
  CommTimeline link;
  const double forward_end = zero3_pass(in, ranks, forward, 0, in.step.forward_s, true, false, link, p);
  const double backward_end = zero3_pass(in, ranks, backward, forward_end, in.step.backward_s, in.reshard_after_forward,
                                         true, link, p);
  const double norm = dist::ring_allreduce_seconds(in.network, sizeof(double), ranks);
  p.comm_s += norm;
  p.optimizer_s = in.step.optimizer_s / ranks;
  p.step_s = std::max(backward_end, link.free) + norm + p.optimizer_s;
  p.exposed_comm_s = p.step_s - in.step.forward_s - in.step.backward_s - p.optimizer_s;
  p.efficiency = p.step_s > 0 ? in.step.total() / p.step_s : 1;
  return p;
}

}  // namespace

StepPrediction predict_step(const ScalingInputs& in, int ranks) {
  HPCTRAIN_CHECK(ranks >= 1, "scaling model: ranks must be at least 1, got {}", ranks);
  if (parallel::parse_zero_stage(in.zero_stage) == parallel::Sharding::parameters && ranks > 1)
    return predict_zero3(in, ranks);
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

Zero3Units zero3_units(const io::HfConfig& config) {
  Zero3Units out;
  for (const parallel::UnitShapes& unit : parallel::zero3_unit_shapes(config)) {
    int64_t numel = 0;
    for (const auto& [name, shape] : unit.parameters)
      numel += std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<>());
    out.bytes.push_back(4 * numel);
    out.kept.push_back(unit.kept);
  }
  return out;
}

}  // namespace hpctrain::train
