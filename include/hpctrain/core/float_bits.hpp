// The bit pattern of a float32 and back (memcpy: the C++17 std::bit_cast).
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

}  // namespace hpctrain
