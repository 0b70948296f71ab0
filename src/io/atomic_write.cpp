#include "hpctrain/io/atomic_write.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <system_error>

#include "hpctrain/core/error.hpp"
#include "io/file_util.hpp"

namespace hpctrain::io {
namespace {

namespace fs = std::filesystem;

// A hidden sibling of `dir`: ".NAME.<what>-PID".
fs::path hidden_sibling(const fs::path& dir, const char* what) {
  return dir.parent_path() / fmt::format(".{}.{}-{}", dir.filename().string(), what, ::getpid());
}

void sync_tree(const fs::path& root) {
  for (const auto& entry : fs::recursive_directory_iterator(root)) {
    if (entry.is_regular_file() || entry.is_directory()) sync_path(entry.path());
  }
  sync_path(root);
}

}  // namespace

void write_folder_atomically(const fs::path& dir, const std::function<void(const fs::path& tmp)>& fill) {
  const fs::path tmp = hidden_sibling(dir, "tmp");
  std::error_code ignored;
  if (dir.has_parent_path()) fs::create_directories(dir.parent_path());
  fs::remove_all(tmp, ignored);
  fs::create_directories(tmp);
  try {
    fill(tmp);
    sync_tree(tmp);
  } catch (...) {
    fs::remove_all(tmp, ignored);
    throw;
  }
  fs::path aside;
  std::error_code error;
  if (fs::exists(dir)) {
    aside = hidden_sibling(dir, "deleting");
    fs::rename(dir, aside, error);
    if (error) {
      fs::remove_all(tmp, ignored);
      fail("cannot move '{}' aside to replace it: {}", dir.string(), error.message());
    }
  }
  fs::rename(tmp, dir, error);
  if (error) {
    if (!aside.empty()) fs::rename(aside, dir, ignored);
    fs::remove_all(tmp, ignored);
    fail("cannot rename '{}' to '{}': {}", tmp.string(), dir.string(), error.message());
  }
  sync_path(dir.has_parent_path() ? dir.parent_path() : fs::path("."));
  if (!aside.empty()) fs::remove_all(aside, ignored);
}

void write_file_atomically(const fs::path& path, std::string_view contents) {
  detail::AtomicFile file(path);
  file.write(contents.data(), contents.size());
  file.commit();
}

void remove_folder(const fs::path& dir) {
  const fs::path doomed = hidden_sibling(dir, "deleting");
  fs::rename(dir, doomed);
  std::error_code ignored;
  fs::remove_all(doomed, ignored);
}

void sync_path(const fs::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  HPCTRAIN_CHECK(fd >= 0, "cannot open '{}' to sync it: {}", path.string(), std::strerror(errno));
  const int result = ::fsync(fd);
  const int saved_errno = errno;
  ::close(fd);
  // Some file systems refuse fsync on folders (EINVAL); the data files were synced, go on.
  HPCTRAIN_CHECK(result == 0 || saved_errno == EINVAL, "fsync '{}' failed: {}", path.string(),
                 std::strerror(saved_errno));
}

}  // namespace hpctrain::io
