// The checkpoint folder protocol (checkpoint.hpp, Notes [Complete checkpoints] and [Verified checkpoints]).
#include "hpctrain/train/checkpoint.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <future>
#include <iterator>
#include <set>
#include <sstream>
#include <system_error>
#include <thread>

#include "hpctrain/core/error.hpp"
#include "hpctrain/core/log.hpp"
#include "hpctrain/core/sha256.hpp"
#include "hpctrain/io/atomic_write.hpp"

namespace hpctrain::train {
namespace {

namespace fs = std::filesystem;

constexpr const char* kPrefix = "checkpoint-";

bool is_hex_digest(const std::string& text) {
  return text.size() == 64 &&
         std::all_of(text.begin(), text.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

bool is_safe_relative(const std::string& name) {
  if (name.empty() || name.front() == '/') return false;
  for (const auto& part : fs::path(name)) {
    if (part == ".." || part == ".") return false;
  }
  return true;
}

// Files of the kinds a resume reads: each must be covered by the manifest.
bool read_on_resume(const std::string& name) {
  return name.size() >= 5 && (name.compare(name.size() - 5, 5, ".json") == 0 || name.find(".safetensors") != std::string::npos);
}

// Regular files under `dir` (relative, '/'-separated), without the manifest, sorted.
std::vector<std::string> files_under(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& entry : fs::recursive_directory_iterator(dir)) {
    if (!entry.is_regular_file()) continue;
    const std::string name = entry.path().lexically_relative(dir).generic_string();
    if (name != kManifestName) names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  return names;
}

// SHA-256 of each of `names` under `dir`, hashed in parallel (at most one task per core: a checkpoint has a
// few large files, so a save costs about the time of hashing the largest, Note [Verified checkpoints]).
std::vector<std::string> hash_files(const fs::path& dir, const std::vector<std::string>& names) {
  const std::size_t width = std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::string> digests;
  for (std::size_t first = 0; first < names.size(); first += width) {
    std::vector<std::future<std::string>> pending;
    for (std::size_t i = first; i < std::min(names.size(), first + width); ++i)
      pending.push_back(std::async(std::launch::async, [path = dir / names[i]] { return sha256_file_hex(path); }));
    for (auto& digest : pending) digests.push_back(digest.get());
  }
  return digests;
}

}  // namespace

std::string checkpoint_name(int64_t step) { return fmt::format("{}{}", kPrefix, step); }

std::optional<int64_t> parse_checkpoint_name(const std::string& name) {
  const std::string prefix = kPrefix;
  if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) return std::nullopt;
  const std::string digits = name.substr(prefix.size());
  if (digits.size() > 18 || !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return std::nullopt;
  return std::stoll(digits);
}

std::optional<std::string> checkpoint_run_id(const fs::path& dir) {
  std::ifstream file(dir / kTrainerStateName, std::ios::binary);
  if (!file.good()) return std::nullopt;
  const auto state = nlohmann::json::parse(file, nullptr, /*allow_exceptions=*/false);
  if (!state.is_object() || !state.contains("hpctrain") || !state["hpctrain"].is_object()) return std::nullopt;
  const auto& h = state["hpctrain"];
  if (!h.contains("run_id") || !h["run_id"].is_string()) return std::nullopt;
  return h["run_id"].get<std::string>();
}

std::vector<CheckpointEntry> list_checkpoints(const fs::path& output) {
  std::vector<CheckpointEntry> found;
  if (!fs::is_directory(output)) return found;
  for (const auto& entry : fs::directory_iterator(output)) {
    const auto step = parse_checkpoint_name(entry.path().filename().string());
    if (step && entry.is_directory() && fs::is_regular_file(entry.path() / kTrainerStateName))
      found.push_back({*step, entry.path(), checkpoint_run_id(entry.path())});
  }
  std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.step < b.step; });
  return found;
}

std::vector<CheckpointEntry> own_checkpoints(const fs::path& output, const OwnedBy& owned) {
  std::vector<CheckpointEntry> own;
  for (CheckpointEntry& entry : list_checkpoints(output))
    if (owned(entry.run_id)) own.push_back(std::move(entry));
  return own;
}

std::vector<fs::path> rotate_checkpoints(const fs::path& output, int64_t keep, const OwnedBy& owned) {
  std::vector<fs::path> removed;
  if (keep <= 0) return removed;
  const auto own = own_checkpoints(output, owned);
  for (std::size_t i = 0; i + static_cast<std::size_t>(keep) < own.size(); ++i) {
    io::remove_folder(own[i].path);
    removed.push_back(own[i].path);
  }
  return removed;
}

void remove_stale_temporaries(const fs::path& output) {
  if (!fs::is_directory(output)) return;
  std::vector<fs::path> stale;
  for (const auto& entry : fs::directory_iterator(output)) {
    const std::string name = entry.path().filename().string();
    const bool hidden_temp = name.rfind(".", 0) == 0 &&
                             (name.find(".tmp-") != std::string::npos || name.find(".deleting-") != std::string::npos);
    if (hidden_temp) stale.push_back(entry.path());
  }
  std::error_code error;
  for (const fs::path& path : stale) fs::remove_all(path, error);
}

fs::path move_aside(const fs::path& path, const std::string& id, const std::string& tag) {
  const fs::path name = path.filename();
  const fs::path aside = path.parent_path() / fmt::format("{}.{}-{}{}", name.stem().string(), tag, id,
                                                          name.extension().string());
  std::error_code error;
  HPCTRAIN_CHECK(!fs::exists(aside), "cannot move '{}' aside: '{}' exists", path.string(), aside.string());
  fs::rename(path, aside, error);
  HPCTRAIN_CHECK(!error, "cannot move '{}' aside to '{}': {}", path.string(), aside.string(), error.message());
  return aside;
}

std::vector<ManifestEntry> parse_manifest(const std::string& text, const std::string& source) {
  std::vector<ManifestEntry> entries;
  std::istringstream lines(text);
  int line_number = 0;
  for (std::string line; std::getline(lines, line);) {
    ++line_number;
    if (line.empty()) continue;
    const bool well_formed = line.size() > 66 && line[64] == ' ' && (line[65] == ' ' || line[65] == '*');
    ManifestEntry entry{well_formed ? line.substr(0, 64) : "", well_formed ? line.substr(66) : ""};
    HPCTRAIN_CHECK(well_formed && is_hex_digest(entry.sha256), "{}: line {}: expected '<64 hex digits>  NAME', got '{}'",
                   source, line_number, line.substr(0, 100));
    HPCTRAIN_CHECK(is_safe_relative(entry.name), "{}: line {}: '{}' is not a file inside the checkpoint", source,
                   line_number, entry.name);
    entries.push_back(std::move(entry));
  }
  return entries;
}

void write_manifest(const fs::path& dir) {
  const std::vector<std::string> names = files_under(dir);
  const std::vector<std::string> digests = hash_files(dir, names);
  std::string text;
  for (std::size_t i = 0; i < names.size(); ++i) text += fmt::format("{}  {}\n", digests[i], names[i]);
  write_text(dir / kManifestName, text);
}

std::string verify_checkpoint(const fs::path& dir) {
  const fs::path manifest = dir / kManifestName;
  if (!fs::is_regular_file(manifest))
    return fmt::format("'{}' has no {} (written before checksums existed): its files are not verified", dir.string(),
                       kManifestName);
  const std::vector<ManifestEntry> entries = parse_manifest(read_text(manifest), manifest.string());
  std::set<std::string> listed;
  for (const ManifestEntry& entry : entries) {
    HPCTRAIN_CHECK(fs::is_regular_file(dir / entry.name), "{}: listed in {} but missing", (dir / entry.name).string(),
                   kManifestName);
    listed.insert(entry.name);
  }
  const std::vector<std::string> digests = hash_files(dir, std::vector<std::string>(listed.begin(), listed.end()));
  std::size_t i = 0;
  for (const std::string& name : listed) {  // the same order as `digests`
    const auto entry = std::find_if(entries.begin(), entries.end(), [&](const auto& e) { return e.name == name; });
    HPCTRAIN_CHECK(digests[i] == entry->sha256, "{}: SHA-256 checksum mismatch: expected {} ({}), got {}: the file "
                   "is corrupt or was changed after the save", (dir / name).string(), entry->sha256, kManifestName,
                   digests[i]);
    ++i;
  }
  for (const std::string& name : files_under(dir))
    HPCTRAIN_CHECK(listed.count(name) || !read_on_resume(name), "{}: not listed in {}: it was added after the save",
                   (dir / name).string(), kManifestName);
  return "";
}

std::string read_verified_trainer_state(const fs::path& dir) {
  HPCTRAIN_CHECK(fs::is_directory(dir), "'{}': no such checkpoint folder", dir.string());
  if (const std::string warning = verify_checkpoint(dir); !warning.empty()) log::warning("resume: {}", warning);
  const fs::path file = dir / kTrainerStateName;
  return fs::exists(file) ? read_text(file) : "";
}

void write_text(const fs::path& path, const std::string& contents) {
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  HPCTRAIN_CHECK(file.good(), "cannot create '{}': {}", path.string(), std::strerror(errno));
  file.write(contents.data(), static_cast<std::streamsize>(contents.size()));
  file.close();
  HPCTRAIN_CHECK(!file.fail(), "cannot write '{}': {}", path.string(), std::strerror(errno));
}

std::string read_text(const fs::path& path) {
  std::ifstream file(path, std::ios::binary);
  HPCTRAIN_CHECK(file.good(), "cannot open '{}': {}", path.string(), std::strerror(errno));
  return std::string(std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>());
}

}  // namespace hpctrain::train
