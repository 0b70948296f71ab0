#include "io/file_util.hpp"

#include "hpctrain/core/error.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <system_error>
#include <utility>

namespace hpctrain::io::detail {
namespace {
std::string os_reason() { return std::strerror(errno); }
}  // namespace

MappedFile::MappedFile(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  HPCTRAIN_CHECK(fd >= 0, "cannot open '{}': {}", path.string(), os_reason());
  struct stat info {};
  if (::fstat(fd, &info) != 0) {
    const std::string reason = os_reason();
    ::close(fd);
    fail("cannot stat '{}': {}", path.string(), reason);
  }
  if (!S_ISREG(info.st_mode)) {
    ::close(fd);
    fail("'{}' is not a regular file", path.string());
  }
  size_ = static_cast<std::size_t>(info.st_size);
  if (size_ > 0) {
    void* mapped = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (mapped == MAP_FAILED) {
      const int code = errno;
      const std::string reason = os_reason();
      ::close(fd);
      const std::string message = fmt::format("cannot memory-map '{}' ({} bytes): {}", path.string(), size_, reason);
      if (code == ENOMEM) throw OutOfMemoryError(message);  // the address space, not the file, is at fault
      throw Error(message);
    }
    data_ = static_cast<const std::byte*>(mapped);
  }
  ::close(fd);  // the mapping keeps the file alive
}

MappedFile::~MappedFile() { release(); }

MappedFile::MappedFile(MappedFile&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    release();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

void MappedFile::release() noexcept {
  if (data_ != nullptr) ::munmap(const_cast<std::byte*>(data_), size_);
  data_ = nullptr;
  size_ = 0;
}

AtomicFile::AtomicFile(std::filesystem::path path) : path_(std::move(path)) {
  tmp_path_ = path_;
  tmp_path_ += ".tmp";
  fd_ = ::open(tmp_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  HPCTRAIN_CHECK(fd_ >= 0, "cannot create '{}': {}. Hint: does the folder exist and is it writable?",
                 tmp_path_.string(), os_reason());
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) {
    ::close(fd_);
    std::error_code ignored;
    std::filesystem::remove(tmp_path_, ignored);
  }
}

void AtomicFile::write(const void* data, std::size_t bytes) {
  HPCTRAIN_CHECK(fd_ >= 0, "write to '{}' after commit", path_.string());
  const auto* at = static_cast<const char*>(data);
  while (bytes > 0) {
    // Linux writes at most ~2 GiB per call; loop on partial writes and EINTR.
    const ssize_t written = ::write(fd_, at, std::min<std::size_t>(bytes, std::size_t{1} << 30));
    if (written < 0 && errno == EINTR) continue;
    HPCTRAIN_CHECK(written > 0, "cannot write '{}': {}. Hint: is the disk full?", tmp_path_.string(), os_reason());
    at += written;
    bytes -= static_cast<std::size_t>(written);
  }
}

void AtomicFile::commit() {
  HPCTRAIN_CHECK(fd_ >= 0, "'{}' committed twice", path_.string());
  HPCTRAIN_CHECK(::fsync(fd_) == 0, "cannot flush '{}' to disk: {}", tmp_path_.string(), os_reason());
  const int closed = ::close(fd_);
  fd_ = -1;
  if (closed != 0 || ::rename(tmp_path_.c_str(), path_.c_str()) != 0) {
    const std::string reason = os_reason();
    std::error_code ignored;
    std::filesystem::remove(tmp_path_, ignored);
    fail("cannot move '{}' to '{}': {}", tmp_path_.string(), path_.string(), reason);
  }
}

bool is_shard_file_name(std::string_view name, std::string_view prefix, std::string_view suffix) {
  constexpr std::string_view kMiddle = "00000-of-00000";  // digits where the zeros are
  if (name.size() != prefix.size() + kMiddle.size() + suffix.size()) return false;
  if (name.substr(0, prefix.size()) != prefix || name.substr(name.size() - suffix.size()) != suffix) return false;
  const std::string_view middle = name.substr(prefix.size(), kMiddle.size());
  for (std::size_t i = 0; i < kMiddle.size(); ++i) {
    const bool digit = middle[i] >= '0' && middle[i] <= '9';
    if (kMiddle[i] == '0' ? !digit : middle[i] != kMiddle[i]) return false;
  }
  return true;
}

std::string read_text_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  HPCTRAIN_CHECK(in.good(), "cannot open '{}': {}", path.string(), os_reason());
  std::ostringstream text;
  text << in.rdbuf();
  HPCTRAIN_CHECK(!in.bad(), "cannot read '{}'", path.string());
  return text.str();
}

}  // namespace hpctrain::io::detail
