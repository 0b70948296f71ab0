// Shared by the libFuzzer targets: the input as a temporary file, and the rule that hpctrain::Error is the
// expected outcome of hostile input while anything else (another exception, a sanitizer report, a broken
// invariant) is a finding (docs/fuzzing.md).
#pragma once

#include "hpctrain/core/error.hpp"

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace hpctrain::fuzz {

// One file per process under $TMPDIR (default /tmp), rewritten for every input and removed at exit.
class TempFile {
 public:
  // `name` ends with the extension the code under test looks at (".csv", ".h5", ...).
  explicit TempFile(const std::string& name)
      : path_(std::filesystem::temp_directory_path() /
              ("hpctrain-fuzz-" + std::to_string(::getpid()) + "-" + name)) {}
  ~TempFile() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;

  // Replaces the file's content (a fresh inode each time, so an old memory map never sees new bytes).
  void write(const std::uint8_t* data, std::size_t size) const {
    std::error_code ignored;
    std::filesystem::remove(path_, ignored);
    std::ofstream out(path_, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
    out.close();
    if (!out) {
      std::fprintf(stderr, "fuzz harness: cannot write %s\n", path_.c_str());
      std::abort();
    }
  }
  [[nodiscard]] const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// Runs `work`; hpctrain::Error is the documented answer to bad input and is swallowed. Any other exception
// escapes and libFuzzer reports it (uncaught exception -> abort) as a finding.
template <typename Work>
void expect_errors(Work&& work) {
  try {
    work();
  } catch (const Error&) {
  }
}

// A broken invariant of the code under test: print it and abort, so libFuzzer saves the input.
[[noreturn]] inline void finding(const std::string& what) {
  std::fprintf(stderr, "FUZZ FINDING: %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}

#define HPCTRAIN_FUZZ_ASSERT(cond, what)                                           \
  do {                                                                            \
    if (!(cond)) ::hpctrain::fuzz::finding(std::string(#cond) + ": " + (what));  \
  } while (0)

}  // namespace hpctrain::fuzz
