// IDX reader: validate the header as hostile input (overflow-safe element count), then read exactly that many bytes.
#include "hpctrain/data/idx.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>

#include "hpctrain/core/error.hpp"
#include "hpctrain/data/byte_source.hpp"

namespace hpctrain::data {
namespace {

constexpr std::uint8_t kDtypeUnsignedByte = 0x08;

std::uint32_t read_big_endian_u32(const unsigned char* bytes) {
  return (std::uint32_t{bytes[0]} << 24) | (std::uint32_t{bytes[1]} << 16) | (std::uint32_t{bytes[2]} << 8) |
         std::uint32_t{bytes[3]};
}

// Product of the dimensions; fails instead of overflowing (the header is untrusted).
std::uint64_t element_count(const std::filesystem::path& path, const std::vector<std::int64_t>& dims) {
  std::uint64_t count = 1;
  for (const std::int64_t dim : dims) {
    const auto d = static_cast<std::uint64_t>(dim);
    if (d != 0 && count > std::numeric_limits<std::int64_t>::max() / d) {
      fail("IDX file '{}' has dimensions [{}] whose product overflows a 64-bit count; the header is corrupt",
           path.string(), fmt::join(dims, ", "));
    }
    count *= d;
  }
  return count;
}

// Reads exactly `count` bytes, growing the vector as data arrives so a lying header cannot make us allocate
// more than the file really holds (plus one block).
std::vector<std::uint8_t> read_payload(ByteSource& source, std::uint64_t count, std::uint64_t header_bytes,
                                       const std::vector<std::int64_t>& dims) {
  constexpr std::uint64_t kBlock = std::uint64_t{16} << 20;
  std::vector<std::uint8_t> data;
  std::uint64_t got = 0;
  while (got < count) {
    const std::uint64_t wanted = std::min(count - got, kBlock);
    data.resize(got + wanted);
    const std::size_t n = source.read(reinterpret_cast<char*>(data.data() + got), wanted);
    got += n;
    if (n < wanted) break;
  }
  if (got < count) {
    fail(
        "IDX file '{}' is truncated: dims [{}] need {} data bytes after the {}-byte header, got {} "
        "(was the download interrupted?)",
        source.path().string(), fmt::join(dims, ", "), count, header_bytes, got);
  }
  // Anything after the data means the header and the payload disagree: count it for the message.
  std::array<char, 65536> scratch{};
  std::uint64_t trailing = 0;
  for (std::size_t n; (n = source.read(scratch.data(), scratch.size())) > 0;) trailing += n;
  if (trailing > 0) {
    fail("IDX file '{}' has {} trailing bytes: dims [{}] need {} data bytes after the {}-byte header, got {}",
         source.path().string(), trailing, fmt::join(dims, ", "), count, header_bytes, count + trailing);
  }
  return data;
}

}  // namespace

std::string idx_dtype_name(std::uint8_t code) {
  switch (code) {
    case 0x08: return "unsigned byte";
    case 0x09: return "signed byte";
    case 0x0B: return "short (int16)";
    case 0x0C: return "int (int32)";
    case 0x0D: return "float (float32)";
    case 0x0E: return "double (float64)";
    default: return "unknown";
  }
}

IdxArray read_idx_u8(const std::filesystem::path& path) {
  ByteSource source(path);
  std::array<unsigned char, 4> magic{};
  const std::size_t magic_read = source.read(reinterpret_cast<char*>(magic.data()), magic.size());
  HPCTRAIN_CHECK(magic_read == magic.size(), "IDX file '{}' is too short: expected a 4-byte header, got {} bytes",
                 path.string(), magic_read);
  if (magic[0] != 0 || magic[1] != 0) {
    fail("'{}' is not an IDX file: expected magic bytes 00 00 <dtype> <ndim>, got {:02x} {:02x} {:02x} {:02x}",
         path.string(), magic[0], magic[1], magic[2], magic[3]);
  }
  const std::uint8_t dtype = magic[2];
  if (dtype != kDtypeUnsignedByte) {
    fail("IDX file '{}' has dtype code 0x{:02X} ({}); only 0x08 (unsigned byte) is supported", path.string(), dtype,
         idx_dtype_name(dtype));
  }
  const std::size_t ndim = magic[3];
  HPCTRAIN_CHECK(ndim > 0, "IDX file '{}' declares 0 dimensions; expected at least 1", path.string());

  std::vector<unsigned char> dim_bytes(4 * ndim);
  const std::size_t dims_read = source.read(reinterpret_cast<char*>(dim_bytes.data()), dim_bytes.size());
  HPCTRAIN_CHECK(dims_read == dim_bytes.size(),
                 "IDX file '{}' is truncated in its header: {} dimensions need {} bytes, got {}", path.string(), ndim,
                 dim_bytes.size(), dims_read);

  IdxArray array;
  for (std::size_t i = 0; i < ndim; ++i) array.dims.push_back(read_big_endian_u32(&dim_bytes[4 * i]));
  const std::uint64_t count = element_count(path, array.dims);
  array.data = read_payload(source, count, 4 + dim_bytes.size(), array.dims);
  return array;
}

void write_idx_u8(const std::filesystem::path& path, const IdxArray& array) {
  HPCTRAIN_CHECK(!array.dims.empty() && array.dims.size() <= 255,
                 "cannot write IDX '{}': expected 1..255 dimensions, got {}", path.string(), array.dims.size());
  std::vector<unsigned char> header = {0, 0, kDtypeUnsignedByte, static_cast<unsigned char>(array.dims.size())};
  for (const std::int64_t dim : array.dims) {
    HPCTRAIN_CHECK(dim >= 0 && dim <= std::numeric_limits<std::uint32_t>::max(),
                   "cannot write IDX '{}': dimension {} does not fit in uint32", path.string(), dim);
    const auto d = static_cast<std::uint32_t>(dim);
    for (int shift = 24; shift >= 0; shift -= 8) header.push_back(static_cast<unsigned char>(d >> shift));
  }
  const std::uint64_t count = element_count(path, array.dims);
  HPCTRAIN_CHECK(array.data.size() == count, "cannot write IDX '{}': dims [{}] need {} bytes, got {}", path.string(),
                 fmt::join(array.dims, ", "), count, array.data.size());

  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(std::fopen(path.c_str(), "wb"), &std::fclose);
  HPCTRAIN_CHECK(file != nullptr, "cannot open '{}' for writing: {}", path.string(), std::strerror(errno));
  const bool ok = std::fwrite(header.data(), 1, header.size(), file.get()) == header.size() &&
                  std::fwrite(array.data.data(), 1, array.data.size(), file.get()) == array.data.size();
  HPCTRAIN_CHECK(ok && std::fclose(file.release()) == 0, "cannot write '{}': {}", path.string(), std::strerror(errno));
}

}  // namespace hpctrain::data
