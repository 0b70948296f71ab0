// Buffered reading of a plain or gzip-compressed file; gzip is detected from the magic bytes (1f 8b), not the name.
// Does not: seek in gzip content, read standard input, or decode anything beyond gzip (concatenated gzip members are supported).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <vector>

namespace hpctrain::data {

class ByteSource {
 public:
  // block_bytes: how many bytes of the file are read per fread (1 MiB by default; at least 16 for the magic probe).
  explicit ByteSource(const std::filesystem::path& path, std::size_t block_bytes = std::size_t{1} << 20);
  ~ByteSource();
  ByteSource(ByteSource&&) noexcept;
  ByteSource& operator=(ByteSource&&) noexcept;
  ByteSource(const ByteSource&) = delete;
  ByteSource& operator=(const ByteSource&) = delete;

  // Copies the next bytes of (decompressed) content into dst: exactly `capacity` bytes unless the content ends
  // first; returns how many were copied, 0 at the end. Throws Error on I/O errors and corrupt or truncated gzip data.
  [[nodiscard]] std::size_t read(char* dst, std::size_t capacity);

  // Plain files only (Error for gzip): the next read() starts at byte `offset` of the file.
  void seek(std::uint64_t offset);

  [[nodiscard]] bool is_gzip() const { return gzip_ != nullptr; }
  // Bytes of the file itself read so far (compressed bytes for gzip); reaches file_size() at the end.
  [[nodiscard]] std::uint64_t bytes_consumed() const { return bytes_consumed_; }
  // Size of the file in bytes (compressed size for gzip), taken when it was opened.
  [[nodiscard]] std::uint64_t file_size() const { return file_size_; }
  [[nodiscard]] const std::filesystem::path& path() const { return path_; }

 private:
  struct Gzip;  // zlib state; zlib.h stays in the .cpp

  bool refill_input();
  std::size_t read_plain(char* dst, std::size_t capacity);
  std::size_t read_gzip(char* dst, std::size_t capacity);

  std::filesystem::path path_;
  std::FILE* file_ = nullptr;
  std::uint64_t file_size_ = 0;
  std::uint64_t bytes_consumed_ = 0;
  bool file_eof_ = false;
  // Raw file bytes read ahead of the caller: the magic-byte probe (plain), or compressed input for zlib (gzip).
  std::vector<unsigned char> input_;
  std::size_t input_begin_ = 0;
  std::size_t input_end_ = 0;
  std::unique_ptr<Gzip> gzip_;
};

// Writes the content of `from` (decompressed when it is gzip) to the new file `to`. Throws Error naming
// `from` for read and gzip errors and `to` for write errors; a partly written `to` is left to the caller.
void copy_content(const std::filesystem::path& from, const std::filesystem::path& to);

}  // namespace hpctrain::data
