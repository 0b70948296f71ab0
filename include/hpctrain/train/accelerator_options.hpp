// AcceleratorOptions: how an Accelerator binds a rank and reduces gradients; declared once here, held by
// TrainOptions (`hpctrain train`) and passed by custom loops to Accelerator's constructor.
#pragma once

#include <cstdint>
#include <string>

#include "hpctrain/dist/buckets.hpp"
#include "hpctrain/dist/comm.hpp"
#include "hpctrain/train/precision.hpp"

namespace hpctrain::train {

// MiB as the options state them, from the bytes dist/buckets.hpp defaults to (the one place they are set).
inline constexpr double bytes_to_mib(int64_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); }

struct AcceleratorOptions {
  std::string device = "auto";        // auto | cpu | cuda (train/device.hpp)
  int threads = 0;                    // CPU threads per rank; 0 = cores on the node / ranks on the node
  double bucket_mb = bytes_to_mib(dist::kDefaultBucketBytes);             // cap of every bucket after the first, MiB
  double first_bucket_mb = bytes_to_mib(dist::kDefaultFirstBucketBytes);  // cap of the first bucket, MiB
  bool overlap = true;                // reduce buckets while backward runs
  int64_t gradient_accumulation_steps = 1;  // micro-batches per optimizer step (accumulate())
  uint64_t seed = 42;                 // weights, data order and dropout seeds (seed_step), Note [Dropout seeds]
  bool log_all_ranks = false;         // every rank logs, lines prefixed "[rank r]"
  // Seconds a collective may wait before the job ends naming the missing ranks; 0 = off. Process-wide
  // (Comm::set_collective_timeout, Note [Collective timeout]).
  double collective_timeout = dist::kDefaultCollectiveTimeoutSeconds;
  // Autocast region of forward and loss (autocast()); fp16 needs CUDA. Weights stay float32.
  MixedPrecision mixed_precision = MixedPrecision::no;
  LossScaling loss_scaling = LossScaling::automatic;  // dynamic: scale the loss with any precision
  // The dtype gradients are averaged in across ranks: bf16 halves the bytes (PrecisionPolicy owns it).
  GradReduceDtype grad_reduce_dtype = GradReduceDtype::fp32;
  bool gradient_checkpointing = false;  // transformer layers recompute in backward (Note [Layer checkpointing])
  int64_t local_sgd_steps = 0;          // > 0: Local SGD, parameters averaged every K steps (local_sgd_step()); 0 = off
  // ZeRO (DeepSpeed's and Accelerate's name): 0 = every rank holds everything; 1 = optimizer state sharded
  // (gradient buckets reduce-scattered, each rank updates its slices, parameters all-gathered); 2 = gradients
  // sharded too; 3 = parameters sharded too, gathered unit by unit around their use. Needs the optimizer from
  // Accelerator::make_optimizer. Note [ZeRO slices] in src/dist/zero_slices.cpp; parallel/strategy.hpp.
  int zero_stage = 0;
  // Stage 3: release a unit's gathered parameters after its forward and gather them again for its backward
  // (true), or keep them from forward to backward (false: one all-gather fewer per unit, more memory).
  bool zero_reshard_after_forward = true;
};

}  // namespace hpctrain::train
