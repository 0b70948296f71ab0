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
  int zero_stage = 0;                 // 1 or 2: ZeRO's reduce-scatter, sharded update, all-gather (Note [ZeRO step model])
  // Stage 3 (Note [ZeRO-3 step model]): the units' fp32 bytes in forward order and those kept through the step
  // (zero3_units), and whether a unit is gathered again for backward (--zero-reshard-after-forward).
  std::vector<int64_t> unit_bytes;
  std::vector<bool> unit_kept;  // empty: none
  bool reshard_after_forward = true;
};

struct StepPrediction {
  int ranks = 1;
  double step_s = 0;          // forward + max(backward, the last bucket's end) + optimizer (+ ZeRO's all-gathers)
  double comm_s = 0;          // sum of the buckets' ring allreduce times (ZeRO: reduce-scatters, norm, all-gathers)
  double optimizer_s = 0;     // the update's compute: step.optimizer_s, under ZeRO / ranks (each rank its slices)
  double allgather_s = 0;     // ZeRO: the parameter all-gathers (after the update; stage 3: around each unit) (in comm_s)
  double exposed_comm_s = 0;  // step_s - (forward + backward + optimizer_s): the communication nothing hid
  double efficiency = 1;      // step.total() / step_s: weak scaling (fixed batch per rank)
};

// Note [Overlap model]: backward produces gradients at a constant rate in bytes (bucket k is ready once the
// gradients of buckets 0..k are, at forward + backward · bytes(0..k) / bytes(all)); one communication thread
// reduces the buckets in order, each starting when it is ready and the previous one has ended. Without overlap
// every bucket starts after backward. The optimizer runs after the last bucket. Compute does not slow down
// from the communication, and every ring step costs the same α-β (the slowest link's).
//
// Note [ZeRO step model]: with zero_stage 1 or 2 on more than one rank (docs/zero.md) each bucket is
// reduce-scattered instead of allreduced, on the same thread in the same order: half a ring allreduce (the ring
// *is* a reduce-scatter then an all-gather, Note [Ring alpha-beta]: (p - 1) α + (p - 1) / p · n · β). Then one
// allreduce of 8 bytes (the global gradient norm, also the overflow agreement), the update of this rank's slices
// only (optimizer_s / p), and the all-gather of the updated parameters bucket by bucket (the other half ring
// each). The all-gathers run after the whole update, as the core does (overlapping them with later buckets'
// updates is not done), so they are exposed. Bytes on the wire equal stage 0's; the padding of each bucket to
// a multiple of p elements is ignored. Stage 1 and 2 take the same time here (they differ in memory).
//
// Note [ZeRO-3 step model]: with zero_stage 3 on more than one rank the buckets are the units (unit_bytes, in
// forward order) and one communication timeline carries every collective in the order the step issues them. In
// forward a unit computes forward_s x its share of the bytes once its all-gather (half a ring) has ended; the
// all-gather of the next unit starts when this one starts computing (the prefetch). Backward runs the units in
// reverse the same way: with reshard_after_forward each is gathered again first (the one before it prefetched),
// and each unit's reduce-scatter (half a ring) is queued when its backward ends. Then the norm's allreduce and the
// update of this rank's shards (optimizer_s / p); no all-gather after it (the next forward gathers). Bytes: the
// gathers add one half ring per unit per forward and per backward with resharding, so at p = 2 the wire carries
// 1.5x stage 0's bytes (1x without resharding: docs/zero.md, "Bytes on the wire"); a kept unit (a tied head's
// embeddings, Note [Unit gathers]) is gathered in forward only.
[[nodiscard]] StepPrediction predict_step(const ScalingInputs& inputs, int ranks);

// The units --zero-stage 3 gathers (parallel::zero3_unit_shapes), in forward order: ScalingInputs' unit_bytes (fp32)
// and unit_kept.
struct Zero3Units {
  std::vector<int64_t> bytes;
  std::vector<bool> kept;
};
[[nodiscard]] Zero3Units zero3_units(const io::HfConfig& config);

// The fp32 gradient bytes of each bucket, as the gradient reducer assigns them for this model's parameters.
[[nodiscard]] std::vector<int64_t> gradient_bucket_bytes(const ParameterShapes& shapes);

// Runs `warmup` + `steps` single-rank training steps of the model on random data (as estimate-memory --measure
// does) and returns the median of each phase over the timed steps.
[[nodiscard]] StepProfile measure_step_profile(const io::HfConfig& config, const MemoryEstimateOptions& options,
                                               int threads, int warmup, int steps);

}  // namespace hpctrain::train
