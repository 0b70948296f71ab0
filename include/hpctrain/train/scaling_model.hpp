// `hpctrain bench predict`: the step time of data-parallel training on p ranks, from one rank's measured step
// and an α-β network model. Pure arithmetic (src/train/scaling_model.cpp); measure_step_profile runs the steps.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hpctrain/dist/comm_bench.hpp"
#include "hpctrain/io/hf_config.hpp"
#include "hpctrain/train/memory_estimate.hpp"

namespace hpctrain::train {

// One rank's training step without communication.
struct StepProfile {
  double forward_s = 0, backward_s = 0, optimizer_s = 0;
  [[nodiscard]] double total() const { return forward_s + backward_s + optimizer_s; }
};

struct ScalingInputs {
  StepProfile step;
  std::vector<int64_t> bucket_bytes;  // the reducer's buckets, in the order they are reduced (dist::assign_buckets)
  dist::AlphaBeta network;            // per ring step (Note [Ring alpha-beta])
  bool overlap = true;                // buckets reduced on the communication thread while backward runs
};

struct StepPrediction {
  int ranks = 1;
  double step_s = 0;          // forward + max(backward, the last bucket's end) + optimizer
  double comm_s = 0;          // sum of the buckets' ring allreduce times
  double exposed_comm_s = 0;  // step_s - step.total(): the communication backward did not hide
  double efficiency = 1;      // step.total() / step_s: weak scaling (fixed batch per rank)
};

// Note [Overlap model]: backward produces gradients at a constant rate in bytes (bucket k is ready once the
// gradients of buckets 0..k are, at forward + backward · bytes(0..k) / bytes(all)); one communication thread
// reduces the buckets in order, each starting when it is ready and the previous one has ended. Without overlap
// every bucket starts after backward. The optimizer runs after the last bucket. Compute does not slow down
// from the communication, and every ring step costs the same α-β (the slowest link's).
[[nodiscard]] StepPrediction predict_step(const ScalingInputs& inputs, int ranks);

// The fp32 gradient bytes of each bucket, as the gradient reducer assigns them for this model's parameters.
[[nodiscard]] std::vector<int64_t> gradient_bucket_bytes(const ParameterShapes& shapes);

// Runs `warmup` + `steps` single-rank training steps of the model on random data (as estimate-memory --measure
// does) and returns the median of each phase over the timed steps.
[[nodiscard]] StepProfile measure_step_profile(const io::HfConfig& config, const MemoryEstimateOptions& options,
                                               int threads, int warmup, int steps);

}  // namespace hpctrain::train
