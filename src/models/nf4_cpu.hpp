// The CPU loops' arguments for a 4-bit weight held in tensors (nf4.cpp), shared by the dequantization, the fused
// products (quantized_linear.cpp) and their tests. Internal to src/models.
#pragma once

#include <ATen/core/Tensor.h>

#include "hpctrain/models/nf4.hpp"
#include "models/nf4_kernel.hpp"

namespace hpctrain::models::detail {

// Pointers into `w` and `absmax` (block_absmax(w), contiguous; both must outlive the result) for a dequantization
// into `dtype` (float32 or bfloat16).
[[nodiscard]] Quant4CpuArgs quant4_cpu_args(const Quant4Weight& w, const at::Tensor& absmax, at::ScalarType dtype);

}  // namespace hpctrain::models::detail
