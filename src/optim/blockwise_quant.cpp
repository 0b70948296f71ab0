// bitsandbytes' dynamic quantization maps, the nearest-value lookup and blockwise (de)quantization.
#include "hpctrain/optim/blockwise_quant.hpp"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "hpctrain/core/dynamic_map.hpp"
#include "hpctrain/core/error.hpp"
#include "hpctrain/core/float_bits.hpp"
#include "vector_clones.hpp"

namespace hpctrain::optim::quant {

Code dynamic_map(bool is_signed) { return core::dynamic_map(is_signed); }

// Note [Quantizer thresholds]
// The float32 bit pattern orders floats of one sign monotonically, and the nearest map value is a
// monotone function of x (both distances |x - code[i]| are rounded monotonically; x is first clamped to
// the map's range, else far outside it all distances round to one value and the tie rule would break
// monotonicity). So nearest(x) >= i exactly when x >= T[i], the smallest float whose nearest index is
// >= i (found once per map by bisection over the ordered floats with nearest_by_scan, the definition),
// and nearest(x) counts the thresholds at or below x. The count starts from a table: for all floats that
// share the top 14 bits (sign, exponent, 5 mantissa bits: a "bucket") the nearest index lies between the
// nearest indices of the bucket's two end points; over [0.1, 1] a bucket spans 1/32 of an octave, at most
// four map values (checked when the table is built), so the lowest one plus three comparisons give the
// index with no search and no branch: exactly what nearest_by_scan() returns, tie rule included
// (tests/optim/blockwise_quant_test.cpp checks edges, midpoints, samples; the goldens of bitsandbytes
// check the codes). NaN lands in a bucket of the all-ones exponent, whose lowest index is 0, and
// compares false with every threshold: 0, as the scan gives.
namespace {

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

// Floats in increasing order as unsigned keys (-0 just below +0), and back.
std::uint32_t ordered_key(float x) {
  const std::uint32_t bits = bits_of(x);
  return bits >> 31 ? ~bits : bits | 0x80000000u;
}
float from_ordered_key(std::uint32_t key) { return float_of(key >> 31 ? key & 0x7FFFFFFFu : ~key); }

// The smallest float in [low, high] whose scan index is >= index (high's is), by bisection over the keys.
float threshold(const Quantizer& quantizer, std::uint8_t index, float low, float high) {
  std::uint32_t below = ordered_key(low), at = ordered_key(high);  // scan(below) < index <= scan(at)
  if (quantizer.nearest_by_scan(low) >= index) return low;
  while (at - below > 1) {
    const std::uint32_t mid = below + (at - below) / 2;
    (quantizer.nearest_by_scan(from_ordered_key(mid)) >= index ? at : below) = mid;
  }
  return from_ordered_key(at);
}

}  // namespace

Quantizer::Quantizer(const Code& code) : code_(code), lowest_(std::size_t{1} << (32 - kBucketShift)) {
  HPCTRAIN_CHECK(std::is_sorted(code_.begin(), code_.end()), "quantization map is not sorted ascending");
  thresholds_.fill(std::numeric_limits<float>::infinity());
  for (int i = 1; i < 256; ++i) {
    const auto index = static_cast<std::uint8_t>(i);
    if (nearest_by_scan(code_.back()) >= index) thresholds_[static_cast<size_t>(i)] = threshold(*this, index, code_.front(), code_.back());
  }
  constexpr std::uint32_t kExponentMask = 0x7F800000u;
  for (std::uint32_t bucket = 0; bucket < lowest_.size(); ++bucket) {
    const std::uint32_t low = bucket << kBucketShift;
    if ((low & kExponentMask) == kExponentMask) continue;  // infinities and NaNs: after clamping only NaN, index 0
    const std::uint8_t a = nearest_by_scan(float_of(low));
    const std::uint8_t b = nearest_by_scan(float_of(low | ((1u << kBucketShift) - 1)));
    HPCTRAIN_CHECK(std::max(a, b) - std::min(a, b) <= 3,
                   "quantization map too dense for the lookup: floats with top bits {:#x} round to indices {}..{}",
                   bucket, std::min(a, b), std::max(a, b));
    lowest_[bucket] = std::min(a, b);
  }
}

std::uint8_t Quantizer::nearest_by_scan(float x) const { return nearest_in(code_, clamp(x), 0, 255); }

const Quantizer& signed_dynamic() {
  static const Quantizer quantizer(dynamic_map(true));
  return quantizer;
}

const Quantizer& unsigned_dynamic() {
  static const Quantizer quantizer(dynamic_map(false));
  return quantizer;
}

namespace {

// max |x[i]| over n floats, NaN skipped (as bitsandbytes' fmax does). Eight running maxima, so the loop
// vectorizes: a maximum does not depend on the order the values are taken in.
float block_absmax(const float* x, int64_t n) {
  constexpr int kLanes = 8;
  float lanes[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int k = 0; k < kLanes; ++k) {
      const float magnitude = std::fabs(x[i + k]);
      lanes[k] = magnitude > lanes[k] ? magnitude : lanes[k];
    }
  }
  for (; i < n; ++i) lanes[0] = std::fabs(x[i]) > lanes[0] ? std::fabs(x[i]) : lanes[0];
  return *std::max_element(lanes, lanes + kLanes);
}

// y[i] = clamp(x[i] / absmax, low, high) (Quantizer::clamp) for i < n.
HPCTRAIN_VECTOR_CLONES
void scale_and_clamp(const float* __restrict x, float absmax, float low, float high, int64_t n, float* __restrict y) {
  for (int64_t i = 0; i < n; ++i) {
    const float scaled = x[i] / absmax;
    y[i] = scaled < low ? low : high < scaled ? high : scaled;
  }
}

// Quantizer::nearest_clamped over n floats, on raw arrays. Hardware gathers (AVX2 _mm256_i32gather_*) made
// this loop and dequantize_block's slower on AMD Zen 5 (8-bit AdamW 4.5-5.7 against 4.1 ns per parameter),
// so both stay scalar; the lowest-index table is one byte per bucket (16 KiB per map) to stay in L1.
void nearest_clamped_n(const std::uint8_t* __restrict lowest, const float* __restrict thresholds,
                       const float* __restrict y, int64_t n, std::uint8_t* __restrict codes) {
  for (int64_t i = 0; i < n; ++i) {
    const int low = lowest[bits_of(y[i]) >> Quantizer::kBucketShift];
    const float* above = thresholds + low + 1;
    codes[i] = static_cast<std::uint8_t>(low + (y[i] >= above[0]) + (y[i] >= above[1]) + (y[i] >= above[2]));
  }
}

}  // namespace

void Quantizer::nearest_clamped(const float* y, int64_t n, std::uint8_t* codes) const {
  nearest_clamped_n(lowest_.data(), thresholds_.data(), y, n, codes);
}

float quantize_block(const Quantizer& quantizer, const float* x, int64_t n, std::uint8_t* codes) {
  const float absmax = block_absmax(x, n);
  if (absmax == 0.0f) {
    std::fill(codes, codes + n, quantizer.nearest(0.0f));
    return absmax;
  }
  // Two loops that vectorize: the division and clamp, then the lookup (a gather and three comparisons).
  float scaled[kBlockSize];
  for (int64_t start = 0; start < n; start += kBlockSize) {
    const int64_t len = std::min(kBlockSize, n - start);
    scale_and_clamp(x + start, absmax, quantizer.code().front(), quantizer.code().back(), len, scaled);
    quantizer.nearest_clamped(scaled, len, codes + start);
  }
  return absmax;
}

void dequantize_block(const Quantizer& quantizer, const std::uint8_t* codes, float absmax, int64_t n, float* out) {
  const float* code = quantizer.code().data();
  for (int64_t i = 0; i < n; ++i) out[i] = code[codes[i]] * absmax;
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

}  // namespace hpctrain::optim::quant
