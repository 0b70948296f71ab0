// MNIST-style IDX files (plain or gzip, detected by magic bytes): header 00 00 <dtype> <ndim>, then ndim
// big-endian uint32 dimensions, then the data in row-major order. Only unsigned bytes (dtype 0x08) are read.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace hpctrain::data {

struct IdxArray {
  std::vector<std::int64_t> dims;  // e.g. {60000, 28, 28} for MNIST training images, {60000} for its labels
  std::vector<std::uint8_t> data;  // row-major, product(dims) elements
};

// Reads the whole file. Throws Error naming the file on a bad magic, a dtype other than 0x08 (naming the dtype),
// zero dimensions, or a data length that differs from product(dims) (truncated or trailing bytes: both counts).
[[nodiscard]] IdxArray read_idx_u8(const std::filesystem::path& path);

// Writes a plain (uncompressed) IDX file of unsigned bytes; data.size() must equal product(dims). For tests and tools.
void write_idx_u8(const std::filesystem::path& path, const IdxArray& array);

// Name of an IDX dtype code ("unsigned byte" for 0x08, "float" for 0x0D, ...; "unknown" otherwise).
[[nodiscard]] std::string idx_dtype_name(std::uint8_t code);

}  // namespace hpctrain::data
