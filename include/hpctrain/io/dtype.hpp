// Element types of safetensors files and a non-owning view of one tensor's bytes.
// Only the ten types LibTorch 1.13 can hold are known; F8_*, U16/U32/U64 and newer types are refused
// with an error naming them (see Note [DType order]).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace hpctrain::io {

// Note [DType order]
// The enumerators follow the order of the Rust safetensors `Dtype` enum (BOOL < U8 < I8 < I16 < F16
// < BF16 < I32 < F32 < F64 < I64; F8/U16/U32/U64 omitted). That crate's `prepare()` lays tensors out
// sorted by this order descending, then by name; save_safetensors() does the same, so a file we
// write is byte-identical to `safetensors.torch.save_file` of the same tensors. Do not reorder.
enum class DType : std::uint8_t { boolean, u8, i8, i16, f16, bf16, i32, f32, f64, i64 };

inline constexpr DType kAllDTypes[] = {DType::boolean, DType::u8,  DType::i8,  DType::i16, DType::f16,
                                       DType::bf16,    DType::i32, DType::f32, DType::f64, DType::i64};

// Bytes per element.
[[nodiscard]] std::size_t item_size(DType dtype);
// The header spelling: "F32", "BF16", "BOOL", ...
[[nodiscard]] std::string_view dtype_name(DType dtype);
// Inverse of dtype_name (exact, case-sensitive, as safetensors); nullopt for anything else.
[[nodiscard]] std::optional<DType> parse_dtype(std::string_view name);
// "F64, F32, F16, BF16, I64, I32, I16, I8, U8, BOOL", for error messages.
[[nodiscard]] std::string supported_dtype_names();
[[nodiscard]] bool is_floating_point(DType dtype);

// One tensor's bytes, owned by someone else (a mapped file, or the caller when writing).
// Data is little-endian, row-major and NOT necessarily aligned to item_size: copy or memcpy it.
struct TensorView {
  std::string name;
  DType dtype = DType::f32;
  std::vector<std::int64_t> shape;  // [] is a scalar (one element)
  const std::byte* data = nullptr;
  std::size_t nbytes = 0;  // bytes at `data`: numel() * item_size(dtype)

  // Product of the shape (1 for a scalar). Assumes a validated shape (no overflow check here).
  [[nodiscard]] std::int64_t numel() const;
};

// Bytes that `shape` of `dtype` needs, or nullopt when a dimension is negative or the product
// overflows std::size_t (a hostile or corrupt shape).
[[nodiscard]] std::optional<std::size_t> checked_nbytes(const std::vector<std::int64_t>& shape, DType dtype);

// "[2, 3]" for messages.
[[nodiscard]] std::string shape_string(const std::vector<std::int64_t>& shape);

}  // namespace hpctrain::io
