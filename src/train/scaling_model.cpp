// scaling_model.hpp: the predicted data-parallel step (Note [Overlap model]) and the reducer's bucket sizes.
#include "hpctrain/train/scaling_model.hpp"

#include <algorithm>
#include <numeric>

#include "hpctrain/core/error.hpp"
#include "hpctrain/dist/buckets.hpp"

namespace hpctrain::train {

StepPrediction predict_step(const ScalingInputs& in, int ranks) {
  HPCTRAIN_CHECK(ranks >= 1, "scaling model: ranks must be at least 1, got {}", ranks);
  const double total_bytes = static_cast<double>(std::accumulate(in.bucket_bytes.begin(), in.bucket_bytes.end(), int64_t{0}));
  const double backward_end = in.step.forward_s + in.step.backward_s;
  StepPrediction p;
  p.ranks = ranks;
  double ready_bytes = 0, comm_end = 0;
  for (const int64_t bytes : in.bucket_bytes) {
    ready_bytes += static_cast<double>(bytes);
    const double ready = in.overlap && total_bytes > 0
                             ? in.step.forward_s + in.step.backward_s * ready_bytes / total_bytes
                             : backward_end;
    const double cost = dist::ring_allreduce_seconds(in.network, bytes, ranks);
    p.comm_s += cost;
    comm_end = std::max(comm_end, ready) + cost;
  }
  p.step_s = std::max(backward_end, comm_end) + in.step.optimizer_s;
  p.exposed_comm_s = p.step_s - in.step.total();
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
