// Private to src/io: a read-only memory map of a whole file, and atomic file writes.
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>
#include <string_view>

namespace hpctrain::io::detail {

// Note [Mapped files stay valid]
// A mapping stays valid only while nobody truncates the file (a read past the new end is SIGBUS).
// hpctrain never rewrites a file in place: every writer writes `path.tmp` and renames it over `path`
// (AtomicFile), which swaps the directory entry and leaves a mapped old file untouched. So a
// checkpoint can be loaded, modified and saved back to the same path while still mapped.

// Read-only mapping of a regular file (RAII; move-only; moving keeps the mapped address).
// An empty file has data() == nullptr and size() == 0.
class MappedFile {
 public:
  MappedFile() = default;
  explicit MappedFile(const std::filesystem::path& path);  // Error names the path and the OS reason
  ~MappedFile();
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  [[nodiscard]] const std::byte* data() const { return data_; }
  [[nodiscard]] std::size_t size() const { return size_; }

 private:
  void release() noexcept;
  const std::byte* data_ = nullptr;
  std::size_t size_ = 0;
};

// Writes `path` atomically: bytes go to `path.tmp`, commit() fsyncs and renames it over `path`.
// Destroying it without commit() removes the temporary file (an error path leaves no debris).
class AtomicFile {
 public:
  explicit AtomicFile(std::filesystem::path path);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(const void* data, std::size_t bytes);
  void commit();

 private:
  std::filesystem::path path_;
  std::filesystem::path tmp_path_;
  int fd_ = -1;
};

// True for `<prefix>NNNNN-of-NNNNN<suffix>` (transformers' shard names, e.g. "model-", ".safetensors").
[[nodiscard]] bool is_shard_file_name(std::string_view name, std::string_view prefix, std::string_view suffix);

// Whole-file helper with errors naming the path (atomic writes: hpctrain/io/atomic_write.hpp).
[[nodiscard]] std::string read_text_file(const std::filesystem::path& path);

}  // namespace hpctrain::io::detail
