// Private to src/train: the sum of squares behind gradient clipping's global norm, in float64.
//
// Note [Gradient norm in float64]
// Stage 0 (Accelerator::clip_grad_norm) sums whole gradients, ZeRO (ZeroOptimizer::unscaled_sum_of_squares)
// sums each rank's slices and allreduces the partial sums: the same numbers grouped differently. Summed in
// float32 the two norms differ in their last bits, so do the clipping coefficients, and 8-bit AdamW's codes
// (a step function of the state) can round to a neighbouring value. Both sides therefore square and add in
// float64 (a float32 square is exact in float64), where regrouping moves the sum by about 1e-16 relative,
// far below the float32 rounding of the coefficient the gradients are multiplied by: stage 0 and stages 1-2
// clip by the same float32 factor. Chunks bound the float64 copy (kSquaresChunk elements at a time); the
// result stays on the tensors' device, so the caller reads it back once.
#pragma once

#include <ATen/ATen.h>

#include <algorithm>
#include <cstdint>

namespace hpctrain::train::detail {

inline constexpr int64_t kSquaresChunk = int64_t{1} << 22;  // 32 MiB of float64

// Adds the squares of `values`' elements (any floating dtype) to `total` (a float64 scalar on their device,
// undefined before the first call). An inf or NaN element makes the total non-finite.
inline void add_sum_of_squares(at::Tensor& total, const at::Tensor& values) {
  const at::Tensor flat = values.detach().reshape({-1});
  for (int64_t start = 0; start < flat.numel(); start += kSquaresChunk) {
    const at::Tensor wide = flat.slice(0, start, std::min(flat.numel(), start + kSquaresChunk)).to(at::kDouble);
    const at::Tensor part = at::dot(wide, wide);
    total = total.defined() ? total.add_(part) : part;
  }
}

}  // namespace hpctrain::train::detail
