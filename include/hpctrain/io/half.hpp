// 16-bit floats without LibTorch: F16 (IEEE binary16) and BF16 (bfloat16) to and from float32.
// Widening is exact. Narrowing rounds to nearest, ties to even, in integer arithmetic (so it does not
// depend on the FPU rounding mode or flush-to-zero), and matches torch's `.to(float16/bfloat16)` bit for
// bit on every non-NaN input (tests/io/golden). NaN narrows to a quiet NaN: F16 0x7E00 with the sign
// kept, BF16 0x7FC0 (as c10's scalar path; torch's vector path may give other NaN bit patterns).
#pragma once

#include "hpctrain/core/float_bits.hpp"
#include "hpctrain/io/dtype.hpp"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace hpctrain::io {

[[nodiscard]] float f16_to_f32(std::uint16_t bits);
using hpctrain::bf16_to_f32;  // core/float_bits.hpp (the gradient reducer's bf16 wire uses them too)
[[nodiscard]] std::uint16_t f32_to_f16(float value);
using hpctrain::f32_to_bf16;

// Converts `count` elements of F16, BF16, F32 or F64 little-endian bytes (any alignment) to float32.
// F64 rounds to nearest; any other dtype throws Error.
void convert_to_f32(DType dtype, const std::byte* in, std::size_t count, float* out);
// Converts float32 values to `count` elements of F16, BF16, F32 or F64 little-endian bytes at `out`
// (count * item_size(dtype) bytes, any alignment); any other dtype throws Error.
void convert_from_f32(const float* in, std::size_t count, DType dtype, std::byte* out);

// The tensor's values as float32 (floating-point dtypes only; Error names the tensor otherwise).
[[nodiscard]] std::vector<float> to_f32(const TensorView& tensor);

}  // namespace hpctrain::io
