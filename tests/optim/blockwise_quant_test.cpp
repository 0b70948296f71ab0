// Blockwise dynamic quantization (blockwise_quant.hpp): the maps' shape, the bucketed nearest-value lookup
// against the full scan, and each element's error against the bound the map spacing gives.
#include <boost/test/unit_test.hpp>

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "../error_capture.hpp"
#include "quant_bounds.hpp"
#include "hpctrain/core/float_bits.hpp"
#include "hpctrain/optim/blockwise_quant.hpp"

using namespace hpctrain::optim;
using hpctrain::float_of;

namespace {

// Floats the lookup could get wrong: bucket edges (top 14 bits) with their neighbours, every midpoint
// between map values with a few ulps around it, the map values, and random floats in [-1, 1].
std::vector<float> hard_floats(const quant::Code& code) {
  std::vector<float> xs;
  for (std::uint32_t bucket = 0; bucket < (1u << 14); ++bucket) {
    const std::uint32_t low = bucket << 18, high = low | ((1u << 18) - 1);
    for (std::uint32_t bits : {low, low + 1, high - 1, high}) xs.push_back(float_of(bits));
  }
  for (std::size_t i = 0; i + 1 < code.size(); ++i) {
    const float mid = (code[i] + code[i + 1]) / 2;
    float below = mid, above = mid;
    for (int k = 0; k < 4; ++k) {
      below = std::nextafter(below, -2.0f), above = std::nextafter(above, 2.0f);
      xs.insert(xs.end(), {below, above});
    }
    xs.insert(xs.end(), {mid, code[i], -code[i]});
  }
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  for (int i = 0; i < 100000; ++i) xs.push_back(uniform(rng) * std::pow(10.0f, -7.0f * (i % 8) / 7.0f));
  return xs;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(blockwise_quant)

BOOST_AUTO_TEST_CASE(dynamic_maps_have_bitsandbytes_shape) {
  const quant::Code s = quant::dynamic_map(true), u = quant::dynamic_map(false);
  BOOST_TEST(std::is_sorted(s.begin(), s.end()));
  BOOST_TEST(std::adjacent_find(s.begin(), s.end()) == s.end());  // 256 distinct values
  BOOST_TEST(s.front() == -0.99296875f);
  BOOST_TEST(s.back() == 1.0f);
  BOOST_TEST(std::count(s.begin(), s.end(), 0.0f) == 1);
  BOOST_TEST(u.front() == 0.0f);
  BOOST_TEST(u.back() == 1.0f);
  BOOST_TEST(std::adjacent_find(u.begin(), u.end()) == u.end());
  // The smallest nonzero magnitudes: 10^-6 times the midpoint of [0.1, 1] (signed), of [0.1, 0.55] (unsigned).
  BOOST_TEST(s[128] == 1e-6f * 0.55f);
  BOOST_TEST(u[1] == 1e-6f * ((0.1f + 0.55f) / 2));
}

BOOST_AUTO_TEST_CASE(bucketed_lookup_equals_the_full_scan) {
  for (const quant::Quantizer* q : {&quant::signed_dynamic(), &quant::unsigned_dynamic()}) {
    int wrong = 0;
    for (float x : hard_floats(q->code())) {
      const bool differs = q->nearest(x) != q->nearest_by_scan(x);
      if (differs) BOOST_TEST_MESSAGE("x = " << std::hexfloat << x << ": " << int(q->nearest(x)) << " != " << int(q->nearest_by_scan(x)));
      wrong += differs;
    }
    BOOST_TEST(wrong == 0);
    // Exact map values map to themselves; ties between two neighbours go to the lower index.
    for (int i = 0; i < 256; ++i) BOOST_TEST(q->nearest(q->value(static_cast<std::uint8_t>(i))) == i);
  }
}

// The array lookup quantize_block uses (clamp, then thresholds over a whole block) gives the scan's index
// for every hard float and the special ones: NaN (index 0, as the scan), infinities, signed zeros, subnormals.
BOOST_AUTO_TEST_CASE(block_lookup_equals_the_full_scan) {
  for (const quant::Quantizer* q : {&quant::signed_dynamic(), &quant::unsigned_dynamic()}) {
    std::vector<float> xs = hard_floats(q->code());
    const float inf = std::numeric_limits<float>::infinity();
    xs.insert(xs.end(), {std::nanf(""), -std::nanf(""), inf, -inf, 0.0f, -0.0f, float_of(1), float_of(0x80000001u)});
    std::vector<float> clamped(xs.size());
    std::transform(xs.begin(), xs.end(), clamped.begin(), [&](float x) { return q->clamp(x); });
    std::vector<std::uint8_t> codes(xs.size());
    q->nearest_clamped(clamped.data(), static_cast<int64_t>(clamped.size()), codes.data());
    int wrong = 0;
    for (std::size_t i = 0; i < xs.size(); ++i) {
      const bool differs = codes[i] != q->nearest_by_scan(xs[i]) || q->nearest(xs[i]) != codes[i];
      if (differs) BOOST_TEST_MESSAGE("x = " << std::hexfloat << xs[i] << ": " << int(codes[i]) << " != " << int(q->nearest_by_scan(xs[i])));
      wrong += differs;
    }
    BOOST_TEST(wrong == 0);
    BOOST_TEST(q->nearest(std::nanf("")) == 0);
  }
}

BOOST_AUTO_TEST_CASE(each_element_within_half_a_map_gap_times_absmax) {
  at::manual_seed(5);
  const int64_t n = 5 * quant::kBlockSize + 77;  // a partial last block
  at::Tensor x = at::randn({n}) * at::rand({n}).pow(6) * 3;
  x.slice(0, 256, 512).zero_();                 // an all-zero block
  for (const auto& [q, values] : {std::pair{&quant::signed_dynamic(), x}, std::pair{&quant::unsigned_dynamic(), x.abs()}}) {
    const quant::Quantized packed = quant::quantize_blockwise(values, *q);
    BOOST_TEST(packed.absmax.numel() == 6);
    for (int64_t block = 0; block < 6; ++block) {
      const at::Tensor elements = values.slice(0, block * 256, std::min(n, block * 256 + 256));
      BOOST_TEST(packed.absmax[block].item<float>() == elements.abs().max().item<float>());
    }
    const at::Tensor back = quant::dequantize_blockwise(packed.codes, packed.absmax, *q);
    BOOST_TEST(hpctrain::testing::outside_block_bounds(back, values, packed.absmax, q->code()) == 0);
    BOOST_TEST(at::equal(back.slice(0, 256, 512), at::zeros({256})));
  }
}

BOOST_AUTO_TEST_CASE(tensor_functions_check_their_inputs) {
  using hpctrain::testing::contains;
  using hpctrain::testing::error_message;
  const std::string dtype = error_message([] { (void)quant::quantize_blockwise(at::ones({4}, at::kDouble), quant::signed_dynamic()); });
  BOOST_TEST(contains(dtype, "expected a CPU float32 tensor, got cpu Double"), dtype);
  const std::string count = error_message([] {
    (void)quant::dequantize_blockwise(at::zeros({300}, at::kByte), at::ones({1}), quant::signed_dynamic());
  });
  BOOST_TEST(contains(count, "expected CPU uint8 codes and 2 float32 absmax values, got 300 codes (Byte) and 1"), count);
}

BOOST_AUTO_TEST_SUITE_END()
