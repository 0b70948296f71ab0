// Start-up agreement of the ranks (run_agreement.hpp, Note [Agreed options]).
#include "hpctrain/train/run_agreement.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cstring>
#include <fstream>
#include <map>

#include "hpctrain/core/error.hpp"
#include "hpctrain/core/sha256.hpp"
#include "hpctrain/data/dataset_identity.hpp"
#include "hpctrain/dist/collective.hpp"

namespace hpctrain::train {
namespace {

namespace fs = std::filesystem;

// Bytes at each end of a file that enter its identity: enough to tell checkpoints apart, cheap for GBs.
constexpr std::size_t kSampleBytes = 64 * 1024;
// Ranks listed per value in a disagreement message.
constexpr std::size_t kMaxListedRanks = 8;
// Files of a folder that identify a model, config or tokenizer folder.
constexpr const char* kFolderFiles[] = {"config.json", "model.safetensors", "model.safetensors.index.json",
                                        "vocab.txt", "tokenizer.json", "tokenizer_config.json"};

std::string read_at(std::ifstream& in, std::uintmax_t offset, std::size_t bytes) {
  std::string text(bytes, '\0');
  in.seekg(static_cast<std::streamoff>(offset));
  in.read(text.data(), static_cast<std::streamsize>(bytes));
  text.resize(static_cast<std::size_t>(in.gcount()));
  return text;
}

std::string file_identity(const fs::path& file) {
  const std::uintmax_t size = fs::file_size(file);
  std::ifstream in(file, std::ios::binary);
  HPCTRAIN_CHECK(in.good(), "'{}': cannot be read", file.string());
  const std::size_t head = static_cast<std::size_t>(std::min<std::uintmax_t>(size, kSampleBytes));
  const std::size_t tail = static_cast<std::size_t>(std::min<std::uintmax_t>(size - head, kSampleBytes));
  const std::string digest = sha256_hex(read_at(in, 0, head) + read_at(in, size - tail, tail));
  return fmt::format("{} bytes, sha256:{}", size, digest.substr(0, 16));
}

// The ranks holding each distinct value, in order of the lowest rank.
std::vector<std::pair<std::string, std::vector<int>>> group_by_value(const std::vector<std::string>& values) {
  std::vector<std::pair<std::string, std::vector<int>>> groups;
  for (std::size_t r = 0; r < values.size(); ++r) {
    auto group = std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == values[r]; });
    if (group == groups.end()) group = groups.insert(groups.end(), {values[r], {}});
    group->second.push_back(static_cast<int>(r));
  }
  return groups;
}

std::string ranks_having(const std::vector<int>& ranks, const std::string& value) {
  const std::size_t listed = std::min(ranks.size(), kMaxListedRanks);
  std::string who = fmt::format("{} {}", ranks.size() == 1 ? "rank" : "ranks",
                                fmt::join(ranks.begin(), ranks.begin() + static_cast<std::ptrdiff_t>(listed), ", "));
  if (listed < ranks.size()) who += fmt::format(" and {} more", ranks.size() - listed);
  return fmt::format("{} {} {}", who, ranks.size() == 1 ? "has" : "have", value);
}

// Entry names in first-seen order over all ranks (ranks running different versions may list others).
std::vector<std::string> entry_names(const std::vector<RunDescription>& per_rank) {
  std::vector<std::string> names;
  for (const RunDescription& description : per_rank)
    for (const auto& [name, value] : description)
      if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
  return names;
}

std::string value_of(const RunDescription& description, const std::string& name) {
  for (const auto& [entry, value] : description)
    if (entry == name) return value;
  return "(not described)";
}

std::string serialize(const RunDescription& description) { return nlohmann::json(description).dump(); }

RunDescription deserialize(const std::string& text) {
  return nlohmann::json::parse(text).get<RunDescription>();
}

}  // namespace

std::string path_identity(const fs::path& path) {
  if (path.empty()) return "";
  if (!fs::exists(path)) return "missing";
  if (!fs::is_directory(path)) return file_identity(path);
  std::vector<std::string> parts;
  for (const char* name : kFolderFiles)
    if (fs::is_regular_file(path / name)) parts.push_back(fmt::format("{} ({})", name, file_identity(path / name)));
  return parts.empty() ? "a folder without model or tokenizer files" : fmt::format("{}", fmt::join(parts, "; "));
}

RunDescription describe_train_options(const TrainOptions& options,
                                      const std::function<std::string(const std::string&, const std::string&)>& identify) {
  RunDescription description;
  for (const OptionField& field : train_option_fields()) {
    const std::string flag = field.flag;
    if (field.agreement == Agreement::value) description.emplace_back(flag, field.text(options));
    if (field.agreement == Agreement::content && flag != "--data") description.emplace_back(flag, identify(flag, field.text(options)));
  }
  return description;
}

void add_dataset_identity(RunDescription& description, const std::string& flag, const data::DatasetReader& dataset) {
  for (const auto& [name, value] : data::dataset_identity(dataset)) description.emplace_back(fmt::format("{} ({})", flag, name), value);
}

std::string describe_differences(const std::vector<RunDescription>& per_rank) {
  std::vector<std::string> lines;
  for (const std::string& name : entry_names(per_rank)) {
    std::vector<std::string> values;
    for (const RunDescription& description : per_rank) values.push_back(value_of(description, name));
    const auto groups = group_by_value(values);
    if (groups.size() == 1) continue;
    std::vector<std::string> parts;
    for (const auto& [value, ranks] : groups) parts.push_back(ranks_having(ranks, value.empty() ? "(none)" : value));
    lines.push_back(fmt::format("{} differs across ranks: {}", name, fmt::join(parts, ", ")));
  }
  return fmt::format("{}", fmt::join(lines, "\n"));
}

void agree_across_ranks(dist::Comm& comm, const RunDescription& mine, const std::string& what) {
  const std::string text = serialize(mine);
  Sha256 hash;
  hash.update(text);
  const std::array<uint8_t, 32> digest = hash.digest();
  std::vector<uint8_t> all(digest.size() * static_cast<std::size_t>(comm.world_size()));
  comm.allgather(digest.data(), digest.size(), all.data());
  bool same = true;
  for (std::size_t r = 0; r < all.size(); r += digest.size()) same &= std::memcmp(all.data() + r, digest.data(), digest.size()) == 0;
  if (same) return;  // every rank computed the same `same`: all of them return, or all exchange below
  std::vector<RunDescription> per_rank;
  for (int r = 0; r < comm.world_size(); ++r) {
    std::string theirs = text;
    comm.broadcast_string(theirs, r);
    per_rank.push_back(deserialize(theirs));
  }
  fail("the ranks of this job disagree on {}:\n{}\n  hint: give every rank the same options and the same dataset file",
       what, describe_differences(per_rank));
}

void agree_on_train_run(dist::Comm& comm, const TrainOptions& options, const data::DatasetReader& dataset) {
  RunDescription mine;
  dist::run_collectively(comm, "describing the run for the ranks' agreement", [&] {
    mine = describe_train_options(options, [](const std::string& flag, const std::string& text) {
      return flag == "--model-config" && text.rfind("preset:", 0) == 0 ? text : path_identity(text);
    });
    add_dataset_identity(mine, "--data", dataset);
  });
  agree_across_ranks(comm, mine, "the options of `hpctrain train` and its dataset");
}

}  // namespace hpctrain::train
