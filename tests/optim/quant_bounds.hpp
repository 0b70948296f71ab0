// Test helper: the error bound of blockwise quantization, derived from the map's spacing and each block's absmax.
#pragma once

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>

#include "hpctrain/optim/blockwise_quant.hpp"

namespace hpctrain::testing {

// Half the gap between the two map values around y (y in [-1, 1]); beyond the ends, the distance to the end.
inline double half_gap(const optim::quant::Code& code, double y) {
  if (y <= code.front()) return code.front() - y;
  if (y >= code.back()) return y - code.back();
  // The first map value above y, compared in double (y rounded to float could reach the end of the map).
  const auto upper = std::upper_bound(code.begin(), code.end(), y, [](double a, float b) { return a < b; });
  return (static_cast<double>(*upper) - static_cast<double>(*(upper - 1))) / 2;
}

// How many elements of `quantized` (the dequantized values) are farther from `exact` than the bound
// absmax x (half_gap(exact / absmax) + 1e-6): the map's rounding plus float32 rounding of the arithmetic.
inline int64_t outside_block_bounds(const at::Tensor& quantized, const at::Tensor& exact, const at::Tensor& absmax,
                                    const optim::quant::Code& code) {
  const at::Tensor q = quantized.to(at::kDouble).flatten().contiguous(), x = exact.to(at::kDouble).flatten().contiguous();
  const at::Tensor scales = absmax.to(at::kDouble).contiguous();
  int64_t outside = 0;
  for (int64_t i = 0; i < q.numel(); ++i) {
    const double scale = scales.data_ptr<double>()[i / optim::quant::kBlockSize];
    const double value = x.data_ptr<double>()[i];
    const double bound = scale == 0 ? 1e-30 : scale * (half_gap(code, value / scale) + 1e-6);
    outside += std::fabs(q.data_ptr<double>()[i] - value) > bound;
  }
  return outside;
}

}  // namespace hpctrain::testing
