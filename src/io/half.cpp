#include "hpctrain/io/half.hpp"

#include "hpctrain/core/error.hpp"
#include "hpctrain/core/float_bits.hpp"

#include <cstring>

namespace hpctrain::io {
namespace {

// Shifts `value` right by `shift` (1..31) bits, rounding to nearest, ties to even.
std::uint32_t shift_right_round_even(std::uint32_t value, unsigned shift) {
  const std::uint32_t kept = value >> shift;
  const std::uint32_t rest = value & ((1u << shift) - 1u);
  const std::uint32_t half = 1u << (shift - 1u);
  return kept + ((rest > half || (rest == half && (kept & 1u))) ? 1u : 0u);
}

template <typename T>
T load(const std::byte* at) {
  T value;
  std::memcpy(&value, at, sizeof value);
  return value;
}

template <typename T>
void store(std::byte* at, T value) {
  std::memcpy(at, &value, sizeof value);
}

}  // namespace

float f16_to_f32(std::uint16_t bits) {
  const std::uint32_t sign = static_cast<std::uint32_t>(bits & 0x8000u) << 16;
  const std::uint32_t exponent = (bits >> 10) & 0x1Fu;
  std::uint32_t mantissa = bits & 0x3FFu;
  if (exponent == 0x1F) return float_of(sign | 0x7F800000u | (mantissa << 13));  // inf, NaN (payload kept)
  if (exponent != 0) return float_of(sign | ((exponent + 112u) << 23) | (mantissa << 13));
  if (mantissa == 0) return float_of(sign);  // +-0
  // Subnormal half: normalise; every one is a normal float32.
  std::uint32_t shift = 0;
  while ((mantissa & 0x400u) == 0) {
    mantissa <<= 1;
    ++shift;
  }
  return float_of(sign | ((113u - shift) << 23) | ((mantissa & 0x3FFu) << 13));
}

std::uint16_t f32_to_f16(float value) {
  const std::uint32_t bits = bits_of(value);
  const auto sign = static_cast<std::uint16_t>((bits >> 16) & 0x8000u);
  const std::uint32_t magnitude = bits & 0x7FFFFFFFu;
  if (magnitude > 0x7F800000u) return sign | 0x7E00u;   // NaN -> quiet NaN
  if (magnitude >= 0x477FF000u) return sign | 0x7C00u;  // >= 65520 rounds past 65504: inf
  if (magnitude >= 0x38800000u) {                        // >= 2^-14: normal half
    // Rebias the exponent (127 -> 15) in place; a mantissa carry correctly bumps the exponent.
    return sign | static_cast<std::uint16_t>(shift_right_round_even(magnitude - (112u << 23), 13));
  }
  // Subnormal half: value / 2^-24, rounded. Float32 subnormals (exponent 0) are far below 2^-25.
  const std::uint32_t exponent = magnitude >> 23;
  if (exponent < 102) return sign;  // below 2^-25: rounds to zero
  const std::uint32_t mantissa = (magnitude & 0x7FFFFFu) | 0x800000u;
  return sign | static_cast<std::uint16_t>(shift_right_round_even(mantissa, 126u - exponent));
}

void convert_to_f32(DType dtype, const std::byte* in, std::size_t count, float* out) {
  switch (dtype) {
    case DType::f32:
      if (count > 0) std::memcpy(out, in, count * sizeof(float));
      return;
    case DType::f16:
      for (std::size_t i = 0; i < count; ++i) out[i] = f16_to_f32(load<std::uint16_t>(in + 2 * i));
      return;
    case DType::bf16:
      for (std::size_t i = 0; i < count; ++i) out[i] = bf16_to_f32(load<std::uint16_t>(in + 2 * i));
      return;
    case DType::f64:
      for (std::size_t i = 0; i < count; ++i) out[i] = static_cast<float>(load<double>(in + 8 * i));
      return;
    default:
      fail("convert_to_f32: cannot convert {} to float32; expected F64, F32, F16 or BF16", dtype_name(dtype));
  }
}

void convert_from_f32(const float* in, std::size_t count, DType dtype, std::byte* out) {
  switch (dtype) {
    case DType::f32:
      if (count > 0) std::memcpy(out, in, count * sizeof(float));
      return;
    case DType::f16:
      for (std::size_t i = 0; i < count; ++i) store(out + 2 * i, f32_to_f16(in[i]));
      return;
    case DType::bf16:
      for (std::size_t i = 0; i < count; ++i) store(out + 2 * i, f32_to_bf16(in[i]));
      return;
    case DType::f64:
      for (std::size_t i = 0; i < count; ++i) store(out + 8 * i, static_cast<double>(in[i]));
      return;
    default:
      fail("convert_from_f32: cannot convert float32 to {}; expected F64, F32, F16 or BF16", dtype_name(dtype));
  }
}

std::vector<float> to_f32(const TensorView& tensor) {
  HPCTRAIN_CHECK(is_floating_point(tensor.dtype),
                 "tensor '{}' is {}, expected a floating-point dtype (F64, F32, F16 or BF16) to read it as float32",
                 tensor.name, dtype_name(tensor.dtype));
  const std::size_t count = tensor.nbytes / item_size(tensor.dtype);
  std::vector<float> values(count);
  convert_to_f32(tensor.dtype, tensor.data, count, values.data());
  return values;
}

}  // namespace hpctrain::io
