// Private to src/train: the parts of estimate-memory that ZeRO shards (Note [ZeRO memory arithmetic] in
// zero_memory_estimate.cpp).
#pragma once

#include <cstdint>
#include <optional>

#include "hpctrain/train/memory_estimate.hpp"

namespace hpctrain::train::detail {

// Bytes per rank of what --zero-stage changes, for options.zero_stage over options.world_size ranks.
struct ZeroTerms {
  int64_t parameters = 0;       // stage 3: this rank's shards and the units gathered at the peak; else unused
  int64_t gradients = 0;        // the gradients the optimizer reads: full buckets (stage 1), this rank's slices (2)
  int64_t reducer_buckets = 0;  // besides them: the reduced slices (stage 1) and what the reduction at the end of
                                // backward holds beyond the activations' peak (both stages)
  int64_t optimizer_state = 0;  // the largest rank's share of the state
};

// Error naming the option when the stage, the world size or the bucket caps are out of range, or the
// optimizer is not sharded elementwise (Adafactor). None at stage 0 or on one rank (nothing is sharded).
// `activation_bytes`: the step's activation peak, which the end of backward's reduction does not coincide with.
[[nodiscard]] std::optional<ZeroTerms> zero_terms(const ParameterShapes& parameters, const MemoryEstimateOptions& options,
                                                  int64_t activation_bytes);
// Stage 3 over options.world_size > 1 ranks, for the model of `config` (its units: parallel::zero3_unit_shapes).
[[nodiscard]] ZeroTerms zero3_terms(const io::HfConfig& config, const MemoryEstimateOptions& options,
                                    int64_t activation_bytes);

}  // namespace hpctrain::train::detail
