// Test helpers for the sources suite: a scratch directory per test and plain/gzip fixture writers.
#pragma once

#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <string_view>

namespace sources_test {

namespace fs = std::filesystem;

// A fresh directory under the system temp dir, removed with everything in it when the object goes.
class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    path_ = fs::temp_directory_path() /
            ("hpctrain-sources-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  fs::path operator/(const std::string& name) const { return path_ / name; }

 private:
  fs::path path_;
};

inline void write_file(const fs::path& path, std::string_view content) {
  std::ofstream out(path, std::ios::binary);
  out.write(content.data(), static_cast<std::streamsize>(content.size()));
  if (!out) throw std::runtime_error("cannot write fixture " + path.string());
}

// Writes content gzip-compressed with zlib's gzopen/gzwrite; mode "ab" appends another gzip member.
inline void write_gzip(const fs::path& path, std::string_view content, const char* mode = "wb") {
  gzFile file = gzopen(path.c_str(), mode);
  if (file == nullptr) throw std::runtime_error("cannot gzopen fixture " + path.string());
  std::size_t written = 0;
  while (written < content.size()) {
    const auto chunk = static_cast<unsigned>(std::min<std::size_t>(content.size() - written, 1u << 30));
    if (gzwrite(file, content.data() + written, chunk) != static_cast<int>(chunk)) {
      gzclose(file);
      throw std::runtime_error("gzwrite failed for " + path.string());
    }
    written += chunk;
  }
  if (gzclose(file) != Z_OK) throw std::runtime_error("gzclose failed for " + path.string());
}

inline std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

}  // namespace sources_test
