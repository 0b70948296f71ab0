// core::dynamic_map (dynamic_map.hpp).
#include "hpctrain/core/dynamic_map.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <vector>

namespace hpctrain::core {
namespace {

// torch.linspace(start, end, steps, dtype=torch.float32) as LibTorch computes it on CPU: from each end
// towards the middle, each value start + step * i (or end - step * (steps - 1 - i)) rounded once (fused).
std::vector<float> linspace(float start, float end, int steps) {
  const float step = (end - start) / static_cast<float>(steps - 1);
  const int halfway = steps / 2;
  std::vector<float> values(static_cast<size_t>(steps));
  for (int i = 0; i < steps; ++i) {
    values[static_cast<size_t>(i)] = i < halfway ? std::fma(step, static_cast<float>(i), start)
                                                 : std::fma(-step, static_cast<float>(steps - 1 - i), end);
  }
  return values;
}

}  // namespace

std::array<float, 256> dynamic_map(bool is_signed) {
  // For each decade 10^(i-6), i = 0..6, the midpoints of a linear grid over [0.1, 1] with 2^i (signed, and their
  // negatives) or 2^(i+1) (unsigned) intervals; then 0 and 1. (Its "additional items" are 2^(7-7) - 1 = 0 for
  // these parameters.)
  constexpr int max_exponent_bits = 7;
  std::vector<float> data;
  for (int i = 0; i < max_exponent_bits; ++i) {
    const int fraction_items = (1 << (is_signed ? i : i + 1)) + 1;
    const std::vector<float> boundaries = linspace(0.1f, 1.0f, fraction_items);
    const float scale = static_cast<float>(std::pow(10.0, i - (max_exponent_bits - 1)));
    for (size_t k = 0; k + 1 < boundaries.size(); ++k) {
      const float mean = (boundaries[k] + boundaries[k + 1]) / 2.0f;
      data.push_back(scale * mean);
      if (is_signed) data.push_back(-(scale * mean));
    }
  }
  data.push_back(0.0f);
  data.push_back(1.0f);
  if (data.size() != 256) throw std::logic_error("dynamic map: not 256 values");
  std::sort(data.begin(), data.end());
  std::array<float, 256> code;
  std::copy(data.begin(), data.end(), code.begin());
  return code;
}

}  // namespace hpctrain::core
