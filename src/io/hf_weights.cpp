// Hugging Face weight folders: find_weights, SafetensorsCheckpoint (single or sharded), save_sharded.
#include "hpctrain/core/error.hpp"
#include "hpctrain/io/safetensors.hpp"
#include "io/file_util.hpp"

#include <nlohmann/json.hpp>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <set>
#include <system_error>

namespace hpctrain::io {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

bool is_file(const fs::path& path) {
  std::error_code ignored;
  return fs::is_regular_file(path, ignored);
}

std::vector<std::string> folder_listing(const fs::path& dir) {
  std::vector<std::string> names;
  std::error_code ignored;
  for (const auto& entry : fs::directory_iterator(dir, ignored)) names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

bool is_pytorch_pickle_name(const std::string& name) {
  return name == "pytorch_model.bin" || name == "pytorch_model.bin.index.json" ||
         detail::is_shard_file_name(name, "pytorch_model-", ".bin");
}

bool is_python_identifier(const std::string& name) {
  auto word_char = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_'; };
  return !name.empty() && std::isdigit(static_cast<unsigned char>(name[0])) == 0 &&
         std::all_of(name.begin(), name.end(), word_char);
}

// The model class to name in the conversion hint: config.json's architectures[0] when it is readable
// (AutoModel would drop a task head such as the classifier), else AutoModel.
std::string conversion_class(const fs::path& dir) {
  try {
    const json config = json::parse(detail::read_text_file(dir / "config.json"));
    const auto& architectures = config.at("architectures");
    const std::string name = architectures.at(0).get<std::string>();
    if (is_python_identifier(name)) return name;
  } catch (const std::exception&) {
    // Only a hint: fall back to AutoModel.
  }
  return "AutoModel";
}

[[noreturn]] void refuse_pickle(const fs::path& dir, const std::string& found) {
  const std::string model_class = conversion_class(dir);
  // A valid Python string literal (JSON escapes are Python escapes), whatever the path holds.
  const std::string quoted_dir = json(dir.string()).dump(-1, ' ', true, json::error_handler_t::replace);
  fail("'{}' holds {} but no model.safetensors: pytorch_model.bin is a pickle, which can run arbitrary code; "
       "hpctrain does not load it. Convert it once in Python: `from transformers import {}; "
       "{}.from_pretrained({}).save_pretrained({}, safe_serialization=True)`",
       dir.string(), found, model_class, model_class, quoted_dir, quoted_dir);
}

// A shard name from the index must be a plain file name in the folder (no "../", no absolute path).
void check_shard_name(const std::string& shard, const fs::path& index_path, const std::string& tensor) {
  const fs::path as_path(shard);
  HPCTRAIN_CHECK(!shard.empty() && as_path.filename() == as_path && shard != "." && shard != "..",
                 "'{}': weight_map maps tensor '{}' to '{}'; expected a file name in the same folder (no path)",
                 index_path.string(), tensor, shard);
}

// weight_map of the index: tensor name -> shard file name.
std::map<std::string, std::string> read_weight_map(const fs::path& index_path) {
  json index;
  try {
    index = json::parse(detail::read_text_file(index_path));
  } catch (const json::exception& error) {
    fail("'{}' is not valid JSON: {}", index_path.string(), error.what());
  }
  HPCTRAIN_CHECK(index.is_object() && index.contains("weight_map") && index["weight_map"].is_object(),
                 "'{}': expected an object with a 'weight_map' object (tensor name -> shard file), as transformers "
                 "writes it", index_path.string());
  std::map<std::string, std::string> weight_map;
  for (const auto& [tensor, shard] : index["weight_map"].items()) {
    HPCTRAIN_CHECK(shard.is_string(), "'{}': weight_map entry '{}' must be a shard file name (string), got {}",
                   index_path.string(), tensor, shard.dump());
    check_shard_name(shard.get<std::string>(), index_path, tensor);
    weight_map.emplace(tensor, shard.get<std::string>());
  }
  return weight_map;
}

}  // namespace

WeightsLocation find_weights(const fs::path& dir) {
  std::error_code error;
  HPCTRAIN_CHECK(fs::is_directory(dir, error), "model folder '{}' does not exist or is not a folder", dir.string());
  if (is_file(dir / kSafeWeightsName)) return {WeightsLayout::single_file, dir / kSafeWeightsName};
  if (is_file(dir / kSafeWeightsIndexName)) return {WeightsLayout::sharded, dir / kSafeWeightsIndexName};
  const std::vector<std::string> listing = folder_listing(dir);
  for (const std::string& name : listing) {
    if (is_pytorch_pickle_name(name)) refuse_pickle(dir, name);
  }
  fail("model folder '{}' has no {} or {}; it holds: [{}]. Hint: point to the folder save_pretrained wrote",
       dir.string(), kSafeWeightsName, kSafeWeightsIndexName, fmt::join(listing, ", "));
}

SafetensorsCheckpoint SafetensorsCheckpoint::open(const fs::path& dir) {
  const WeightsLocation location = find_weights(dir);
  SafetensorsCheckpoint checkpoint;
  checkpoint.dir_ = dir;
  checkpoint.layout_ = location.layout;
  if (location.layout == WeightsLayout::single_file) {
    checkpoint.shards_.emplace_back(location.path);
    for (const TensorView& tensor : checkpoint.shards_.front().tensors()) {
      checkpoint.tensors_.emplace(tensor.name, &tensor);
    }
    return checkpoint;
  }

  const fs::path& index_path = location.path;
  const std::map<std::string, std::string> weight_map = read_weight_map(index_path);
  std::vector<std::string> shard_names;
  for (const auto& [tensor, shard] : weight_map) {
    if (std::find(shard_names.begin(), shard_names.end(), shard) == shard_names.end()) shard_names.push_back(shard);
  }
  std::sort(shard_names.begin(), shard_names.end());
  for (const std::string& shard : shard_names) {
    HPCTRAIN_CHECK(is_file(dir / shard), "'{}' lists shard '{}', which is missing from '{}'. Hint: the download or "
                   "copy is incomplete", index_path.string(), shard, dir.string());
    checkpoint.shards_.emplace_back(dir / shard);
  }
  // Every tensor of every shard must be where the index says, and only there.
  std::map<std::string, std::size_t> owner;  // tensor -> shard position
  for (std::size_t i = 0; i < shard_names.size(); ++i) {
    for (const TensorView& tensor : checkpoint.shards_[i].tensors()) {
      const auto listed = weight_map.find(tensor.name);
      HPCTRAIN_CHECK(listed != weight_map.end(), "shard '{}' holds tensor '{}', which '{}' does not list; expected "
                     "the index to name every tensor", shard_names[i], tensor.name, index_path.string());
      const auto [first, inserted] = owner.emplace(tensor.name, i);
      HPCTRAIN_CHECK(inserted, "tensor '{}' is in shard '{}' and in shard '{}'; expected each tensor in exactly one "
                     "shard", tensor.name, shard_names[first->second], shard_names[i]);
      HPCTRAIN_CHECK(listed->second == shard_names[i], "shard '{}' holds tensor '{}', but '{}' assigns it to shard "
                     "'{}'; expected each tensor in exactly one shard, the one the index names", shard_names[i],
                     tensor.name, index_path.string(), listed->second);
      checkpoint.tensors_.emplace(tensor.name, &tensor);
    }
  }
  for (const auto& [tensor, shard] : weight_map) {
    HPCTRAIN_CHECK(checkpoint.tensors_.count(tensor) > 0, "'{}' assigns tensor '{}' to shard '{}', but that shard "
                   "does not hold it", index_path.string(), tensor, shard);
  }
  return checkpoint;
}

std::vector<std::string> SafetensorsCheckpoint::names() const {
  std::vector<std::string> names;
  names.reserve(tensors_.size());
  for (const auto& [name, tensor] : tensors_) names.push_back(name);
  return names;
}

bool SafetensorsCheckpoint::contains(const std::string& name) const { return tensors_.count(name) > 0; }

const TensorView& SafetensorsCheckpoint::tensor(const std::string& name) const {
  const auto found = tensors_.find(name);
  HPCTRAIN_CHECK(found != tensors_.end(), "model folder '{}' has no tensor '{}' ({} tensors)", dir_.string(), name,
                 tensors_.size());
  return *found->second;
}

}  // namespace hpctrain::io
