// bitsandbytes' dynamic quantization maps, the nearest-value lookup and blockwise (de)quantization.
#include "hpctrain/train/blockwise_quant.hpp"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>

#include "hpctrain/core/error.hpp"
#include "hpctrain/core/float_bits.hpp"

namespace hpctrain::train::quant {

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

Code dynamic_map(bool is_signed) {
  // create_dynamic_map(signed, max_exponent_bits=7, total_bits=8): for each decade 10^(i-6), i = 0..6, the
  // midpoints of a linear grid over [0.1, 1] with 2^i (signed, and their negatives) or 2^(i+1) (unsigned)
  // intervals; then 0 and 1. (Its "additional items" are 2^(7-7) - 1 = 0 for these parameters.)
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
  HPCTRAIN_CHECK(data.size() == 256, "dynamic map has {} values, expected 256", data.size());
  std::sort(data.begin(), data.end());
  Code code;
  std::copy(data.begin(), data.end(), code.begin());
  return code;
}

// Note [Quantizer buckets]
// The float32 bit pattern orders floats of one sign monotonically, and the nearest map value is a
// monotone function of x (both distances |x - code[i]| are rounded monotonically; x is first clamped to
// the map's range, else far outside it all distances round to one value and the tie rule would break
// monotonicity). So for all floats that
// share the top 14 bits (sign, exponent, 5 mantissa bits: a "bucket") the nearest index lies between
// the nearest indices of the bucket's two end points. Over [0.1, 1] a bucket spans 1/32 of an octave,
// one to four map values; nearest() scans only those, with the scan's tie rule, so it returns exactly
// what nearest_by_scan() returns (tests/train/test_blockwise_quant.cpp checks edges, midpoints, samples).
// Every bucket spans at most four map values except the one of infinities and NaNs, so nearest() compares
// four candidates without branches.
namespace {

constexpr int kBucketShift = 18;  // 32 - 14 bits

// The lowest index among [first, last] whose value is nearest to x.
std::uint8_t nearest_in(const Code& code, float x, int first, int last) {
  int best = first;
  float best_distance = std::fabs(x - code[static_cast<size_t>(first)]);
  for (int i = first + 1; i <= last; ++i) {
    const float distance = std::fabs(x - code[static_cast<size_t>(i)]);
    if (distance < best_distance) {
      best = i;
      best_distance = distance;
    }
  }
  return static_cast<std::uint8_t>(best);
}

}  // namespace

Quantizer::Quantizer(const Code& code) : code_(code), buckets_(std::size_t{1} << (32 - kBucketShift)) {
  HPCTRAIN_CHECK(std::is_sorted(code_.begin(), code_.end()), "quantization map is not sorted ascending");
  for (std::uint32_t bucket = 0; bucket < buckets_.size(); ++bucket) {
    const std::uint32_t low = bucket << kBucketShift;
    const std::uint8_t a = nearest_by_scan(float_of(low));
    const std::uint8_t b = nearest_by_scan(float_of(low | ((1u << kBucketShift) - 1)));
    buckets_[bucket] = {std::min(a, b), std::max(a, b)};
  }
}

std::uint8_t Quantizer::nearest(float x) const {
  const auto& [first, last] = buckets_[bits_of(x) >> kBucketShift];
  const float y = std::clamp(x, code_.front(), code_.back());
  if (last - first > 3) return nearest_in(code_, y, first, last);  // only the bucket of infinities and NaNs
  // Four candidates without branches (the last repeated when fewer): what nearest_in computes.
  int best = first;
  float best_distance = std::fabs(y - code_[first]);
  for (int k = 1; k <= 3; ++k) {
    const int i = std::min(first + k, static_cast<int>(last));
    const float distance = std::fabs(y - code_[static_cast<size_t>(i)]);
    best = distance < best_distance ? i : best;
    best_distance = distance < best_distance ? distance : best_distance;
  }
  return static_cast<std::uint8_t>(best);
}

std::uint8_t Quantizer::nearest_by_scan(float x) const {
  return nearest_in(code_, std::clamp(x, code_.front(), code_.back()), 0, 255);
}

const Quantizer& signed_dynamic() {
  static const Quantizer quantizer(dynamic_map(true));
  return quantizer;
}

const Quantizer& unsigned_dynamic() {
  static const Quantizer quantizer(dynamic_map(false));
  return quantizer;
}

float quantize_block(const Quantizer& quantizer, const float* x, int64_t n, std::uint8_t* codes) {
  float absmax = 0.0f;
  for (int64_t i = 0; i < n; ++i) {  // NaN is skipped, as bitsandbytes' fmax does
    const float magnitude = std::fabs(x[i]);
    absmax = magnitude > absmax ? magnitude : absmax;
  }
  if (absmax == 0.0f) {
    std::fill(codes, codes + n, quantizer.nearest(0.0f));
    return absmax;
  }
  for (int64_t i = 0; i < n; ++i) codes[i] = quantizer.nearest(x[i] / absmax);
  return absmax;
}

void dequantize_block(const Quantizer& quantizer, const std::uint8_t* codes, float absmax, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = quantizer.value(codes[i]) * absmax;
}

Quantized quantize_blockwise(const at::Tensor& x, const Quantizer& quantizer) {
  HPCTRAIN_CHECK(x.is_cpu() && x.scalar_type() == at::kFloat, "quantize_blockwise: expected a CPU float32 tensor, got {} {}",
                 x.device().str(), c10::toString(x.scalar_type()));
  const at::Tensor values = x.contiguous();
  const int64_t n = values.numel();
  Quantized result{at::empty(values.sizes(), values.options().dtype(at::kByte)),
                   at::empty({block_count(n)}, values.options())};
  const float* data = values.data_ptr<float>();
  std::uint8_t* codes = result.codes.data_ptr<std::uint8_t>();
  float* absmax = result.absmax.data_ptr<float>();
  for (int64_t block = 0, first = 0; first < n; ++block, first += kBlockSize) {
    absmax[block] = quantize_block(quantizer, data + first, std::min(kBlockSize, n - first), codes + first);
  }
  return result;
}

at::Tensor dequantize_blockwise(const at::Tensor& codes, const at::Tensor& absmax, const Quantizer& quantizer) {
  const int64_t n = codes.numel();
  HPCTRAIN_CHECK(codes.is_cpu() && codes.scalar_type() == at::kByte && absmax.scalar_type() == at::kFloat &&
                     absmax.numel() == block_count(n),
                 "dequantize_blockwise: expected CPU uint8 codes and {} float32 absmax values, got {} codes ({}) and {} "
                 "absmax values ({})",
                 block_count(n), n, c10::toString(codes.scalar_type()), absmax.numel(), c10::toString(absmax.scalar_type()));
  const at::Tensor packed = codes.contiguous();
  const at::Tensor scales = absmax.contiguous();
  at::Tensor out = at::empty(codes.sizes(), codes.options().dtype(at::kFloat));
  const std::uint8_t* in = packed.data_ptr<std::uint8_t>();
  float* values = out.data_ptr<float>();
  for (int64_t block = 0, first = 0; first < n; ++block, first += kBlockSize) {
    dequantize_block(quantizer, in + first, scales.data_ptr<float>()[block], std::min(kBlockSize, n - first), values + first);
  }
  return out;
}

}  // namespace hpctrain::train::quant
