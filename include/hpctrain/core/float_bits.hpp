// The bit pattern of a float32 and back (memcpy: the C++17 std::bit_cast), and bfloat16 (the upper half of a
// float32's bits) to and from float32.
#pragma once

#include <cstdint>
#include <cstring>

namespace hpctrain {

[[nodiscard]] inline std::uint32_t bits_of(float value) {
  std::uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}

[[nodiscard]] inline float float_of(std::uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

// bfloat16 bits to float32: exact.
[[nodiscard]] inline float bf16_to_f32(std::uint16_t bits) { return float_of(static_cast<std::uint32_t>(bits) << 16); }

// float32 to bfloat16 bits: round to nearest, ties to even, in integer arithmetic (independent of the FPU's
// rounding mode and flush-to-zero); matches torch's `.to(bfloat16)` on every non-NaN input. NaN becomes the
// canonical quiet NaN 0x7FC0 (c10's scalar path; torch's vector path may give other NaN bit patterns).
// Cannot overflow 32 bits: the largest finite float rounds to inf (0x7F80), inf stays inf, -0 stays -0.
[[nodiscard]] inline std::uint16_t f32_to_bf16(float value) {
  const std::uint32_t bits = bits_of(value);
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u) return 0x7FC0u;
  const std::uint32_t round_even = 0x7FFFu + ((bits >> 16) & 1u);
  return static_cast<std::uint16_t>((bits + round_even) >> 16);
}

}  // namespace hpctrain
