// check_output_file (output_check.hpp): outputs are never inputs, and replace files only with --overwrite.
#include "hpctrain/io/output_check.hpp"

#include <sys/stat.h>

#include <system_error>

#include "hpctrain/core/error.hpp"

namespace hpctrain::io {

namespace fs = std::filesystem;

bool same_file(const fs::path& a, const fs::path& b) {
  struct stat sa {}, sb {};
  if (::stat(a.c_str(), &sa) != 0 || ::stat(b.c_str(), &sb) != 0) return false;
  return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

std::vector<fs::path> files_in(const fs::path& dir) {
  std::vector<fs::path> files;
  std::error_code error;
  if (!fs::is_directory(dir, error)) return files;
  for (const auto& entry : fs::directory_iterator(dir, error))
    if (entry.is_regular_file(error)) files.push_back(entry.path());
  return files;
}

fs::path check_output_file(const fs::path& given, const std::vector<fs::path>& inputs, bool overwrite,
                           const std::string& flag) {
  std::error_code error;
  const fs::path output = fs::weakly_canonical(given, error);
  HPCTRAIN_CHECK(!error, "{} '{}': cannot resolve the path: {}", flag, given.string(), error.message());
  for (const fs::path& input : inputs) {
    if (input.empty()) continue;
    HPCTRAIN_CHECK(!same_file(output, input), "{} '{}' is the input '{}' (the same file): refusing to overwrite an "
                   "input, with or without --overwrite\n  hint: write to another path", flag, given.string(),
                   input.string());
  }
  const fs::file_status status = fs::status(output, error);
  if (!fs::exists(status)) return output;
  HPCTRAIN_CHECK(!fs::is_directory(status), "{} '{}' is a folder: expected a file path", flag, given.string());
  HPCTRAIN_CHECK(overwrite, "{} '{}' exists; pass --overwrite to replace it", flag, given.string());
  return output;
}

}  // namespace hpctrain::io
