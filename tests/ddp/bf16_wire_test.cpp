// The bf16 gradient wire's pieces against a reference written here (Note [bf16 gradient reduction]): the
// pack (torch's .to(bfloat16), as the reducer uses it, and core's f32_to_bf16), the MPI user operation's sum
// (dist::bf16_sum) and the unpack: rounding ties, inf, NaN and negative zero.
#include <boost/test/unit_test.hpp>

#include <ATen/ATen.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "hpctrain/core/float_bits.hpp"
#include "hpctrain/dist/comm.hpp"

namespace {

float from_bits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// The nearest bf16 by exact distance in double, ties to the even significand; NaN -> 0x7FC0; values past
// the largest bf16 by half an ulp or more -> inf.
uint16_t reference_round(double value) {
  if (std::isnan(value)) return 0x7FC0;
  if (std::isinf(value)) return value > 0 ? 0x7F80 : 0xFF80;
  const double magnitude = std::abs(value);
  const uint16_t sign = std::signbit(value) ? 0x8000 : 0;
  uint16_t best = 0;
  double best_distance = magnitude;  // candidate 0
  // Walk the candidates around the float32 truncation of `magnitude`.
  const float narrowed = static_cast<float>(magnitude);
  uint32_t bits;
  std::memcpy(&bits, &narrowed, 4);
  const uint32_t centre = bits >> 16;
  for (uint32_t candidate = centre > 0 ? centre - 1 : 0; candidate <= centre + 1 && candidate <= 0x7F80; ++candidate) {
    const double distance = candidate == 0x7F80 ? std::ldexp(1.0, 128) - magnitude  // inf counts as 2^128
                                                 : std::abs(double(from_bits(candidate << 16)) - magnitude);
    if (distance < best_distance || (distance == best_distance && (candidate & 1u) == 0)) {
      best = static_cast<uint16_t>(candidate);
      best_distance = distance;
    }
  }
  return sign | best;
}

std::vector<float> special_values() {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  return {0.0f, -0.0f, 1.0f, -1.0f, 0.1f, from_bits(0x3F808000) /* tie: down to even */,
          from_bits(0x3F818000) /* tie: up to even */, from_bits(0x3F808001), from_bits(0x3F807FFF),
          std::numeric_limits<float>::max(), -std::numeric_limits<float>::max(), from_bits(0x7F7F7FFF),
          from_bits(0x7F7F8000), inf, -inf, nan, -nan, std::numeric_limits<float>::denorm_min(),
          from_bits(0x00008000), from_bits(0x80018000), 1e-40f, 3.0e38f, 65504.0f};
}

std::vector<float> random_values(std::size_t count) {
  std::mt19937 gen(7);
  std::uniform_int_distribution<uint32_t> bits;
  std::vector<float> values;
  while (values.size() < count) {
    const float f = from_bits(bits(gen));
    if (!std::isnan(f)) values.push_back(f);
  }
  return values;
}

void check_pack(const std::vector<float>& values) {
  const at::Tensor wide = at::from_blob(const_cast<float*>(values.data()), {static_cast<int64_t>(values.size())}, at::kFloat);
  const at::Tensor packed = wide.to(at::kBFloat16).contiguous();  // the reducer's pack
  const auto* torch_bits = static_cast<const uint16_t*>(packed.data_ptr());
  for (std::size_t i = 0; i < values.size(); ++i) {
    const uint16_t expected = reference_round(values[i]);
    BOOST_TEST_INFO("value bits 0x" << std::hex << hpctrain::bits_of(values[i]));
    BOOST_TEST(hpctrain::f32_to_bf16(values[i]) == expected);
    if (std::isnan(values[i])) {
      BOOST_TEST(std::isnan(hpctrain::bf16_to_f32(torch_bits[i])));  // torch's vector path picks its own NaN
    } else {
      BOOST_TEST(torch_bits[i] == expected);
    }
  }
}

}  // namespace

BOOST_AUTO_TEST_SUITE(bf16_wire)

BOOST_AUTO_TEST_CASE(pack_rounds_to_nearest_even_like_the_reference) {
  check_pack(special_values());
  check_pack(random_values(20000));  // long enough for torch's vectorized conversion
}

BOOST_AUTO_TEST_CASE(unpack_is_exact) {
  for (uint32_t bits = 0; bits <= 0xFFFF; ++bits) {
    const float wide = hpctrain::bf16_to_f32(static_cast<uint16_t>(bits));
    if (std::isnan(wide)) continue;
    BOOST_TEST(hpctrain::bits_of(wide) == bits << 16);
    BOOST_TEST(hpctrain::f32_to_bf16(wide) == bits);  // round trip
  }
}

BOOST_AUTO_TEST_CASE(sum_rounds_the_exact_sum_once_and_is_commutative) {
  std::vector<uint16_t> a, b;
  for (float x : special_values()) {
    for (float y : special_values()) {
      a.push_back(reference_round(x));
      b.push_back(reference_round(y));
    }
  }
  std::mt19937 gen(3);
  std::uniform_int_distribution<uint32_t> bits(0, 0xFFFF);
  for (int i = 0; i < 50000; ++i) {
    a.push_back(static_cast<uint16_t>(bits(gen)));
    b.push_back(i % 3 == 0 ? static_cast<uint16_t>(a.back() ^ 0x8000) : static_cast<uint16_t>(bits(gen)));  // cancellations
  }
  std::vector<uint16_t> ab = b, ba = a;
  hpctrain::dist::bf16_sum(a.data(), ab.data(), a.size());
  hpctrain::dist::bf16_sum(b.data(), ba.data(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    // Two bf16 values add exactly in double; one rounding to bf16 is the reference.
    const double exact = double(hpctrain::bf16_to_f32(a[i])) + double(hpctrain::bf16_to_f32(b[i]));
    BOOST_TEST_INFO("0x" << std::hex << a[i] << " + 0x" << b[i]);
    BOOST_TEST(ab[i] == reference_round(exact));
    BOOST_TEST(ab[i] == ba[i]);  // the same bits whichever operand MPI passes first
  }
}

BOOST_AUTO_TEST_CASE(sum_keeps_inf_nan_and_signed_zero) {
  const uint16_t inf = 0x7F80, minus_inf = 0xFF80, zero = 0x0000, minus_zero = 0x8000, one = 0x3F80;
  const uint16_t nans[] = {0x7FC1, 0xFFFF};
  const std::vector<uint16_t> in = {inf, inf, minus_inf, minus_zero, minus_zero, one, nans[0], one, 0x7F7F};
  std::vector<uint16_t> inout = {one, minus_inf, minus_inf, minus_zero, zero, 0xBF80, one, nans[1], 0x7F7F};
  hpctrain::dist::bf16_sum(in.data(), inout.data(), in.size());
  const std::vector<uint16_t> expected = {inf, 0x7FC0, minus_inf, minus_zero, zero, zero, 0x7FC0, 0x7FC0, inf};
  for (std::size_t i = 0; i < in.size(); ++i) {
    BOOST_TEST_INFO("element " << i);
    BOOST_TEST(inout[i] == expected[i]);
  }
}

BOOST_AUTO_TEST_SUITE_END()
