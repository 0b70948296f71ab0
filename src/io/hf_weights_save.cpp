// save_sharded() and its pure parts: plan_shards() and parse_size().
#include "hpctrain/core/error.hpp"
#include "hpctrain/io/safetensors.hpp"
#include "hpctrain/io/atomic_write.hpp"
#include "io/file_util.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <set>
#include <system_error>

namespace hpctrain::io {
namespace {

namespace fs = std::filesystem;

std::string shard_file_name(std::size_t index, std::size_t count) {
  return fmt::format("model-{:05d}-of-{:05d}.safetensors", index + 1, count);
}

void check_unique_names(const std::vector<TensorView>& tensors, const fs::path& dir) {
  std::set<std::string_view> names;
  for (const TensorView& tensor : tensors) {
    HPCTRAIN_CHECK(names.insert(tensor.name).second, "cannot save weights to '{}': tensor '{}' is given twice; "
                   "expected unique names", dir.string(), tensor.name);
  }
}

// transformers' index: {"metadata": {"total_parameters", "total_size"}, "weight_map"}, written with
// json.dumps(index, indent=2, sort_keys=True) + "\n" (nlohmann's json sorts keys; ASCII-escaped as Python).
// total_parameters counts the elements of every tensor saved (transformers counts model parameters).
std::string index_text(const std::vector<TensorView>& tensors, const std::vector<std::vector<std::size_t>>& plan) {
  nlohmann::json weight_map = nlohmann::json::object();
  std::uint64_t total_size = 0;
  std::uint64_t total_parameters = 0;
  for (std::size_t shard = 0; shard < plan.size(); ++shard) {
    for (const std::size_t i : plan[shard]) {
      weight_map[tensors[i].name] = shard_file_name(shard, plan.size());
      total_size += tensors[i].nbytes;
      total_parameters += static_cast<std::uint64_t>(tensors[i].numel());
    }
  }
  nlohmann::json index = {
      {"metadata", {{"total_parameters", total_parameters}, {"total_size", total_size}}},
      {"weight_map", std::move(weight_map)},
  };
  return index.dump(2, ' ', true) + "\n";
}

// Removes weights an earlier save left behind that this save did not overwrite, so the folder holds
// exactly one consistent set (find_weights prefers model.safetensors, so a stale one would shadow
// new shards; transformers leaves it, we do not).
void remove_stale_weights(const fs::path& dir, const SavedWeights& saved) {
  std::set<fs::path> written(saved.files.begin(), saved.files.end());
  std::error_code error;
  std::vector<fs::path> stale;
  for (const auto& entry : fs::directory_iterator(dir, error)) {
    const fs::path& path = entry.path();
    const std::string name = path.filename().string();
    const bool weights = detail::is_shard_file_name(name, "model-", ".safetensors") || name == kSafeWeightsName ||
                         name == kSafeWeightsIndexName;
    if (weights && written.count(path) == 0 && entry.is_regular_file(error)) stale.push_back(path);
  }
  for (const fs::path& path : stale) {
    fs::remove(path, error);
    HPCTRAIN_CHECK(!error, "cannot remove stale weights file '{}': {}", path.string(), error.message());
  }
}

}  // namespace

std::vector<std::vector<std::size_t>> plan_shards(const std::vector<std::uint64_t>& tensor_bytes,
                                                  std::uint64_t max_shard_bytes) {
  std::vector<std::vector<std::size_t>> shards;
  std::vector<std::size_t> current;
  std::uint64_t current_bytes = 0;
  for (std::size_t i = 0; i < tensor_bytes.size(); ++i) {
    const std::uint64_t bytes = tensor_bytes[i];
    if (bytes > max_shard_bytes) {  // too big for any shard: alone, and the current shard stays open
      shards.push_back({i});
      continue;
    }
    if (current_bytes + bytes > max_shard_bytes) {  // no overflow: both are <= max_shard_bytes
      shards.push_back(std::move(current));
      current.clear();
      current_bytes = 0;
    }
    current.push_back(i);
    current_bytes += bytes;
  }
  if (!current.empty()) shards.push_back(std::move(current));
  return shards;
}

namespace {

std::vector<std::vector<std::size_t>> plan_of(const std::vector<TensorView>& tensors, std::uint64_t max_shard_bytes) {
  std::vector<std::uint64_t> sizes;
  sizes.reserve(tensors.size());
  for (const TensorView& tensor : tensors) sizes.push_back(tensor.nbytes);
  return plan_shards(sizes, max_shard_bytes);
}

}  // namespace

std::vector<std::size_t> save_sharded_order(const std::vector<TensorView>& tensors, std::uint64_t max_shard_bytes) {
  std::vector<std::size_t> order;
  for (const std::vector<std::size_t>& shard : plan_of(tensors, max_shard_bytes)) {
    std::vector<TensorView> members;
    for (const std::size_t i : shard) members.push_back(tensors[i]);
    for (const std::size_t k : save_order(members)) order.push_back(shard[k]);
  }
  return order;
}

SavedWeights save_sharded(const fs::path& dir, const std::vector<TensorView>& tensors, const Metadata& metadata,
                          std::uint64_t max_shard_bytes) {
  return save_sharded(dir, tensors, metadata, max_shard_bytes, TensorData{});
}

SavedWeights save_sharded(const fs::path& dir, const std::vector<TensorView>& tensors, const Metadata& metadata,
                          std::uint64_t max_shard_bytes, const TensorData& data) {
  std::error_code error;
  fs::create_directories(dir, error);
  HPCTRAIN_CHECK(!error, "cannot create model folder '{}': {}", dir.string(), error.message());
  check_unique_names(tensors, dir);

  const std::vector<std::vector<std::size_t>> plan = plan_of(tensors, max_shard_bytes);

  SavedWeights saved;
  if (plan.size() <= 1) {
    saved.layout = WeightsLayout::single_file;
    saved.files.push_back(dir / kSafeWeightsName);
    save_safetensors(saved.files.back(), tensors, metadata, data);
  } else {
    saved.layout = WeightsLayout::sharded;
    for (std::size_t shard = 0; shard < plan.size(); ++shard) {
      std::vector<TensorView> members;
      for (const std::size_t i : plan[shard]) members.push_back(tensors[i]);
      saved.files.push_back(dir / shard_file_name(shard, plan.size()));
      const TensorData member_data = !data ? TensorData{} : [&](std::size_t k) { return data(plan[shard][k]); };
      save_safetensors(saved.files.back(), members, metadata, member_data);
    }
    // The index goes last: a reader never sees an index naming shards that are not written yet.
    saved.files.push_back(dir / kSafeWeightsIndexName);
    write_file_atomically(saved.files.back(), index_text(tensors, plan));
  }
  remove_stale_weights(dir, saved);
  return saved;
}

std::uint64_t parse_size(std::string_view text) {
  const std::string original(text);
  auto is_space = [](char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; };
  while (!text.empty() && is_space(text.front())) text.remove_prefix(1);
  while (!text.empty() && is_space(text.back())) text.remove_suffix(1);

  // <digits>[.<digits>] [unit]
  unsigned __int128 whole = 0;
  unsigned __int128 fraction = 0;
  unsigned __int128 fraction_scale = 1;
  std::size_t at = 0;
  bool digits = false;
  const unsigned __int128 kLimit = static_cast<unsigned __int128>(1) << 64;  // every size must fit in 64 bits
  for (; at < text.size() && std::isdigit(static_cast<unsigned char>(text[at])); ++at, digits = true) {
    whole = whole * 10 + static_cast<unsigned>(text[at] - '0');
    HPCTRAIN_CHECK(whole < kLimit, "size '{}' is too large; expected at most {} bytes", original, UINT64_MAX);
  }
  if (at < text.size() && text[at] == '.') {
    for (++at; at < text.size() && std::isdigit(static_cast<unsigned char>(text[at])); ++at, digits = true) {
      if (fraction_scale < 1'000'000'000'000'000'000ull) {  // 19 places: finer cannot change whole bytes
        fraction = fraction * 10 + static_cast<unsigned>(text[at] - '0');
        fraction_scale *= 10;
      }
    }
  }
  std::string unit(text.substr(at));
  while (!unit.empty() && is_space(unit.front())) unit.erase(unit.begin());
  for (char& c : unit) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));

  static const std::pair<const char*, std::uint64_t> kUnits[] = {
      {"", 1},           {"b", 1},          {"kb", 1000},         {"mb", 1000000},         {"gb", 1000000000},
      {"tb", 1000000000000}, {"kib", 1ull << 10}, {"mib", 1ull << 20}, {"gib", 1ull << 30}, {"tib", 1ull << 40},
  };
  const auto* unit_entry = std::find_if(std::begin(kUnits), std::end(kUnits),
                                        [&](const auto& entry) { return unit == entry.first; });
  HPCTRAIN_CHECK(digits && unit_entry != std::end(kUnits), "size '{}' is not a size; expected a number and a unit, "
                 "e.g. '5GB' or '500MiB' (units B, KB, MB, GB, TB = powers of 10; KiB, MiB, GiB, TiB = powers of 2)",
                 original);
  const unsigned __int128 multiplier = unit_entry->second;
  const unsigned __int128 bytes = whole * multiplier + fraction * multiplier / fraction_scale;
  HPCTRAIN_CHECK(bytes <= UINT64_MAX, "size '{}' is too large; expected at most {} bytes", original, UINT64_MAX);
  return static_cast<std::uint64_t>(bytes);
}

}  // namespace hpctrain::io
