// The peak a rank's matrix products reach on this machine: the denominator of MFU (Note [Model FLOPs] in
// models/model_flops.hpp). Measured, not taken from a data sheet: a CPU's peak depends on its vector units,
// its threads and what else runs, and llm.c's GPU figures use the data sheet only because a GPU's is reached.
#pragma once

#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

namespace hpctrain::train {

// FLOP/s of square `dtype` matrix products of size `size` on `device` with the current intra-op threads:
// one warm-up product, then products for about `seconds`, the best rate of three rounds.
[[nodiscard]] double measure_peak_flops(at::Device device, c10::ScalarType dtype, int64_t size = 1024,
                                        double seconds = 0.3);

}  // namespace hpctrain::train
