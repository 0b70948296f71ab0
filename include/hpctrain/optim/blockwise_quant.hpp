// Blockwise dynamic 8-bit quantization as bitsandbytes does it for its 8-bit optimizers (Dettmers et al.,
// "8-bit Optimizers via Block-wise Quantization", 2022): a tensor is cut into blocks of kBlockSize
// elements; each block keeps one float32 absmax and one uint8 index per element into a 256-value map
// (code[index] * absmax is the element). Does not decide which tensors are quantized (AdamW8bit does).
#pragma once

#include <ATen/core/Tensor.h>

#include <array>
#include <cstdint>
#include <vector>

#include "hpctrain/core/float_bits.hpp"

namespace hpctrain::optim::quant {

constexpr int64_t kBlockSize = 256;  // elements per block (bitsandbytes' blocksize for optimizer state)

// The number of blocks holding `numel` elements (the last one may be partial).
[[nodiscard]] constexpr int64_t block_count(int64_t numel) { return (numel + kBlockSize - 1) / kBlockSize; }

using Code = std::array<float, 256>;  // a quantization map, sorted ascending

// bitsandbytes' functional.create_dynamic_map(signed, max_exponent_bits=7, total_bits=8), value for value:
// signed in [-0.993, 1] (the first moment), unsigned in [0, 1] (the second moment).
[[nodiscard]] Code dynamic_map(bool is_signed);

// Nearest-value lookup into one map without a search: a table over the high 14 bits of a float (sign,
// exponent, 5 mantissa bits) gives the lowest index any float in that range can round to, and the map's
// 255 thresholds (the smallest float rounding to each index) add the up to three steps above it
// (Note [Quantizer thresholds]).
class Quantizer {
 public:
  static constexpr int kBucketShift = 18;  // a bucket: the top 32 - 18 = 14 bits

  explicit Quantizer(const Code& code);

  // Index of the map value nearest to x clamped to the map's range (distance |x - code[i]| in float32;
  // ties go to the lower index; NaN gives 0), equal to nearest_by_scan(x) for every float.
  [[nodiscard]] std::uint8_t nearest(float x) const { return nearest_clamped(clamp(x)); }
  // The same by scanning all 256 values: the definition, for tests.
  [[nodiscard]] std::uint8_t nearest_by_scan(float x) const;

  [[nodiscard]] float value(std::uint8_t index) const { return code_[index]; }
  [[nodiscard]] const Code& code() const { return code_; }
  // [i]: the smallest float whose nearest index is >= i (ascending; +inf where no float reaches i, and from 256).
  [[nodiscard]] const std::array<float, 259>& thresholds() const { return thresholds_; }

  // x limited to [code.front(), code.back()] (NaN stays NaN).
  [[nodiscard]] float clamp(float x) const { return x < code_.front() ? code_.front() : code_.back() < x ? code_.back() : x; }
  // nearest() of an x already clamped: branch-free, no search.
  [[nodiscard]] std::uint8_t nearest_clamped(float y) const {
    const int first = lowest_[bits_of(y) >> kBucketShift];
    const float* above = thresholds_.data() + first + 1;
    return static_cast<std::uint8_t>(first + (y >= above[0]) + (y >= above[1]) + (y >= above[2]));
  }
  // codes[i] = nearest_clamped(y[i]) for i < n, vectorized (the same codes).
  void nearest_clamped(const float* y, int64_t n, std::uint8_t* codes) const;

 private:
  Code code_;
  std::array<float, 259> thresholds_;  // [i]: the smallest float whose nearest index is >= i; +inf from 256
  std::vector<std::uint8_t> lowest_;    // per bucket of the top 14 bits: the lowest index a float in it gets
};

// The two maps of the 8-bit optimizers, built once.
[[nodiscard]] const Quantizer& signed_dynamic();
[[nodiscard]] const Quantizer& unsigned_dynamic();

// One block of n <= kBlockSize floats: codes[i] = nearest(x[i] / absmax); returns absmax = max |x[i]|
// (a block of zeros keeps absmax 0 and the index of 0).
float quantize_block(const Quantizer& quantizer, const float* x, int64_t n, std::uint8_t* codes);
// out[i] = code[codes[i]] * absmax, as bitsandbytes' dequantize_blockwise.
void dequantize_block(const Quantizer& quantizer, const std::uint8_t* codes, float absmax, int64_t n, float* out);

// Whole CPU float32 tensors (any shape, flattened): codes (uint8, x's shape) and absmax (block_count).
struct Quantized {
  at::Tensor codes, absmax;
};
[[nodiscard]] Quantized quantize_blockwise(const at::Tensor& x, const Quantizer& quantizer);
[[nodiscard]] at::Tensor dequantize_blockwise(const at::Tensor& codes, const at::Tensor& absmax,
                                              const Quantizer& quantizer);

}  // namespace hpctrain::optim::quant
