// ByteSource: fread in blocks; gzip content is inflated straight into the caller's buffer (no intermediate copy).
#include "hpctrain/data/byte_source.hpp"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <system_error>
#include <utility>

#include "hpctrain/core/error.hpp"

namespace hpctrain::data {

struct ByteSource::Gzip {
  z_stream stream{};
  // True once a gzip member has started and until its end-of-stream marker: running out of file bytes
  // inside a member means the file is truncated; running out between members is the normal end.
  bool in_member = false;

  Gzip() = default;
  Gzip(const Gzip&) = delete;
  Gzip& operator=(const Gzip&) = delete;
  ~Gzip() { inflateEnd(&stream); }
};

ByteSource::ByteSource(const std::filesystem::path& path, std::size_t block_bytes)
    : path_(path), input_(std::max<std::size_t>(block_bytes, 16)) {
  file_ = std::fopen(path.c_str(), "rb");
  if (file_ == nullptr) {
    fail("cannot open '{}' for reading: {}", path.string(), std::strerror(errno));
  }
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  file_size_ = ec ? 0 : static_cast<std::uint64_t>(size);

  // Probe the magic bytes: the probe's bytes stay in input_ and are served first by either path.
  refill_input();
  const bool gzip_magic = input_end_ >= 2 && input_[0] == 0x1f && input_[1] == 0x8b;
  if (gzip_magic) {
    gzip_ = std::make_unique<Gzip>();
    // 15 + 16: maximum window, expect a gzip (not raw zlib) header.
    const int rc = inflateInit2(&gzip_->stream, 15 + 16);
    if (rc != Z_OK) {
      gzip_.reset();
      fail("cannot initialise gzip decoder for '{}': zlib error {}", path.string(), rc);
    }
    gzip_->stream.next_in = input_.data();
    gzip_->stream.avail_in = static_cast<uInt>(input_end_);
  }
}

ByteSource::~ByteSource() {
  if (file_ != nullptr) std::fclose(file_);
}

ByteSource::ByteSource(ByteSource&& other) noexcept
    : path_(std::move(other.path_)),
      file_(std::exchange(other.file_, nullptr)),
      file_size_(other.file_size_),
      bytes_consumed_(other.bytes_consumed_),
      file_eof_(other.file_eof_),
      input_(std::move(other.input_)),
      input_begin_(other.input_begin_),
      input_end_(other.input_end_),
      gzip_(std::move(other.gzip_)) {}

ByteSource& ByteSource::operator=(ByteSource&& other) noexcept {
  if (this != &other) {
    if (file_ != nullptr) std::fclose(file_);
    path_ = std::move(other.path_);
    file_ = std::exchange(other.file_, nullptr);
    file_size_ = other.file_size_;
    bytes_consumed_ = other.bytes_consumed_;
    file_eof_ = other.file_eof_;
    input_ = std::move(other.input_);
    input_begin_ = other.input_begin_;
    input_end_ = other.input_end_;
    gzip_ = std::move(other.gzip_);
  }
  return *this;
}

// Reads the next block of the file into input_ (replacing its contents); false at the end of the file.
bool ByteSource::refill_input() {
  input_begin_ = 0;
  input_end_ = 0;
  if (file_eof_) return false;
  const std::size_t got = std::fread(input_.data(), 1, input_.size(), file_);
  if (got < input_.size()) {
    if (std::ferror(file_))
      fail_read("cannot read '{}' at byte {}: {}", path_.string(), bytes_consumed_, std::strerror(errno));
    file_eof_ = true;
  }
  input_end_ = got;
  bytes_consumed_ += got;
  return got > 0;
}

std::size_t ByteSource::read(char* dst, std::size_t capacity) {
  if (!gzip_) return read_plain(dst, capacity);
  // zlib counts in uInt: inflate at most 1 GiB per call so a huge capacity cannot overflow it.
  constexpr std::size_t max_chunk = std::size_t{1} << 30;
  std::size_t total = 0;
  while (total < capacity) {
    const std::size_t wanted = std::min(capacity - total, max_chunk);
    const std::size_t got = read_gzip(dst + total, wanted);
    total += got;
    if (got < wanted) break;
  }
  return total;
}

void ByteSource::seek(std::uint64_t offset) {
  HPCTRAIN_CHECK(!gzip_, "cannot seek in gzip-compressed '{}': it is read from the start", path_.string());
  if (std::fseek(file_, static_cast<long>(offset), SEEK_SET) != 0)
    fail("cannot seek to byte {} of '{}': {}", offset, path_.string(), std::strerror(errno));
  input_begin_ = input_end_ = 0;
  file_eof_ = false;
  bytes_consumed_ = offset;
}

std::size_t ByteSource::read_plain(char* dst, std::size_t capacity) {
  // First whatever the probe read ahead, then straight from the file into dst.
  std::size_t copied = std::min(capacity, input_end_ - input_begin_);
  if (copied > 0) std::memcpy(dst, input_.data() + input_begin_, copied);
  input_begin_ += copied;
  if (copied == capacity || file_eof_) return copied;

  const std::size_t wanted = capacity - copied;
  const std::size_t got = std::fread(dst + copied, 1, wanted, file_);
  if (got < wanted) {
    if (std::ferror(file_))
      fail_read("cannot read '{}' at byte {}: {}", path_.string(), bytes_consumed_, std::strerror(errno));
    file_eof_ = true;
  }
  bytes_consumed_ += got;
  return copied + got;
}

// capacity <= 1 GiB (see read()).
std::size_t ByteSource::read_gzip(char* dst, std::size_t capacity) {
  z_stream& z = gzip_->stream;
  z.next_out = reinterpret_cast<Bytef*>(dst);
  z.avail_out = static_cast<uInt>(capacity);
  while (z.avail_out > 0) {
    if (z.avail_in == 0) {
      if (!refill_input()) {
        if (gzip_->in_member) {
          fail_read(
              "'{}' is truncated: the gzip data ends inside a compressed stream after {} compressed bytes "
              "(expected an end-of-stream marker; was the download or copy interrupted?)",
              path_.string(), bytes_consumed_);
        }
        break;  // the end, between gzip members
      }
      z.next_in = input_.data();
      z.avail_in = static_cast<uInt>(input_end_);
    }
    gzip_->in_member = true;
    const int rc = inflate(&z, Z_NO_FLUSH);
    if (rc == Z_STREAM_END) {
      // A gzip file may be several members concatenated (e.g. `cat a.gz b.gz`); the next one starts here.
      gzip_->in_member = false;
      inflateReset(&z);
      continue;
    }
    // Z_BUF_ERROR only means "no progress without more input or output space", which the loop provides.
    const bool stuck = rc == Z_BUF_ERROR && z.avail_in > 0 && z.avail_out > 0;
    if ((rc != Z_OK && rc != Z_BUF_ERROR) || stuck) {
      const std::uint64_t offset = bytes_consumed_ - z.avail_in;
      fail_read("corrupt gzip data in '{}' near compressed byte {}: {} (zlib error {}); expected a valid gzip stream",
           path_.string(), offset, z.msg != nullptr ? z.msg : "unknown error", rc);
    }
  }
  return capacity - z.avail_out;
}

void copy_content(const std::filesystem::path& from, const std::filesystem::path& to) {
  ByteSource source(from);
  std::FILE* out = std::fopen(to.c_str(), "wb");
  HPCTRAIN_CHECK(out != nullptr, "cannot create '{}': {}", to.string(), std::strerror(errno));
  std::vector<char> block(std::size_t{1} << 20);
  bool ok = true;
  try {
    for (std::size_t got; ok && (got = source.read(block.data(), block.size())) > 0;)
      ok = std::fwrite(block.data(), 1, got, out) == got;
  } catch (...) {
    std::fclose(out);
    throw;
  }
  const int saved = errno;
  ok = std::fclose(out) == 0 && ok;
  HPCTRAIN_CHECK(ok, "cannot write '{}': {}", to.string(), std::strerror(errno != 0 ? errno : saved));
}

}  // namespace hpctrain::data
