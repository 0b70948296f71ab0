#include "hpctrain/io/dtype.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <limits>

namespace hpctrain::io {

// Tensor data is mapped and used in place; its byte order is fixed by the format.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "safetensors data is little-endian; hpctrain maps it in place");

namespace {
struct DTypeInfo {
  DType dtype;
  std::string_view name;
  std::size_t size;
  bool floating;
};
// Listed widest first, the order HF's documentation uses.
constexpr DTypeInfo kInfo[] = {
    {DType::f64, "F64", 8, true},  {DType::f32, "F32", 4, true},  {DType::f16, "F16", 2, true},
    {DType::bf16, "BF16", 2, true}, {DType::i64, "I64", 8, false}, {DType::i32, "I32", 4, false},
    {DType::i16, "I16", 2, false}, {DType::i8, "I8", 1, false},   {DType::u8, "U8", 1, false},
    {DType::boolean, "BOOL", 1, false},
};

const DTypeInfo& info(DType dtype) {
  for (const auto& entry : kInfo) {
    if (entry.dtype == dtype) return entry;
  }
  return kInfo[0];  // unreachable: every enumerator is listed
}
}  // namespace

std::size_t item_size(DType dtype) { return info(dtype).size; }
std::string_view dtype_name(DType dtype) { return info(dtype).name; }
bool is_floating_point(DType dtype) { return info(dtype).floating; }

std::optional<DType> parse_dtype(std::string_view name) {
  for (const auto& entry : kInfo) {
    if (entry.name == name) return entry.dtype;
  }
  return std::nullopt;
}

std::string supported_dtype_names() {
  std::string out;
  for (const auto& entry : kInfo) {
    if (!out.empty()) out += ", ";
    out += entry.name;
  }
  return out;
}

std::int64_t TensorView::numel() const {
  std::int64_t count = 1;
  for (const std::int64_t dim : shape) count *= dim;
  return count;
}

std::optional<std::size_t> checked_nbytes(const std::vector<std::int64_t>& shape, DType dtype) {
  std::size_t bytes = item_size(dtype);
  for (const std::int64_t dim : shape) {
    if (dim < 0) return std::nullopt;
    if (__builtin_mul_overflow(bytes, static_cast<std::size_t>(dim), &bytes)) return std::nullopt;
  }
  // numel() is an int64; item_size >= 1, so bytes bounds the element count.
  if (bytes > static_cast<std::size_t>(std::numeric_limits<std::int64_t>::max())) return std::nullopt;
  return bytes;
}

std::string shape_string(const std::vector<std::int64_t>& shape) { return fmt::format("[{}]", fmt::join(shape, ", ")); }

}  // namespace hpctrain::io
