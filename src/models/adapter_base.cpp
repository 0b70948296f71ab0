// A base sized for its adapter's head (adapter_base.hpp, Note [Adapter labels]).
#include "hpctrain/models/adapter_base.hpp"

#include "hpctrain/core/error.hpp"
#include "hpctrain/core/host_allocator.hpp"
#include "hpctrain/io/json_text.hpp"
#include "hpctrain/models/lora.hpp"
#include "hpctrain/models/materialize.hpp"
#include "hpctrain/models/pretrained.hpp"
#include "hpctrain/models/qlora.hpp"
#include "hpctrain/models/registry.hpp"
#include "hpctrain/models/tensor_io.hpp"
#include "hpctrain/models/weights.hpp"

#include <algorithm>
#include <fstream>
#include <iterator>
#include <optional>

namespace hpctrain::models {
namespace {

namespace fs = std::filesystem;

// lora_base.json's id2label, when the file has one (Note [Adapter labels], 1).
std::optional<std::vector<std::string>> recorded_adapter_labels(const fs::path& adapter_dir) {
  const fs::path file = adapter_dir / kAdapterBaseName;
  std::ifstream in(file, std::ios::binary);
  if (!in.good()) return std::nullopt;
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const nlohmann::json json = io::parse_json_text(text, file.string());
  if (!json.is_object() || !json.contains("id2label")) return std::nullopt;
  const nlohmann::json& id2label = json["id2label"];
  HPCTRAIN_CHECK(id2label.is_object() && !id2label.empty(), "'{}': id2label must be an object {{\"0\": name, ...}}", file.string());
  std::vector<std::string> names(id2label.size());
  for (size_t id = 0; id < names.size(); ++id) {
    const auto it = id2label.find(std::to_string(id));
    HPCTRAIN_CHECK(it != id2label.end() && it->is_string(), "'{}': id2label has {} entries but no string for \"{}\"",
                   file.string(), id2label.size(), id);
    names[id] = it->get<std::string>();
  }
  return names;
}

// The first dimension of the saved head's weight (Note [Adapter labels], 2).
std::optional<int64_t> saved_head_size(const fs::path& adapter_dir) {
  const TensorMap tensors = load_tensor_file(adapter_dir / kAdapterWeightsName);
  for (const char* head : {"classifier", "score"}) {
    const auto it = tensors.find(std::string("base_model.model.") + head + ".weight");
    if (it != tensors.end() && it->second.dim() == 2) return it->second.size(0);
  }
  return std::nullopt;
}

}  // namespace

nlohmann::json adapter_labels_json(const io::CommonConfig& config) {
  nlohmann::json id2label = nlohmann::json::object(), label2id = nlohmann::json::object();
  for (size_t id = 0; id < config.id2label.size(); ++id) id2label[std::to_string(id)] = config.id2label[id];
  for (const auto& [name, id] : config.label2id) label2id[name] = id;
  return {{"id2label", id2label}, {"label2id", label2id}};
}

io::HfConfig adapter_base_config(const fs::path& base_dir, const fs::path& adapter_dir,
                                 const std::vector<std::string>& dataset_labels) {
  io::HfConfig config = io::HfConfig::load(base_dir);
  if (const auto names = recorded_adapter_labels(adapter_dir)) {
    if (*names != config.common.id2label) config.common.set_labels(*names);
    return config;
  }
  const std::optional<int64_t> size = saved_head_size(adapter_dir);
  if (!size || *size == config.common.num_labels()) return config;
  if (static_cast<int64_t>(dataset_labels.size()) == *size)
    config.common.set_labels(dataset_labels);
  else
    config.common.set_num_labels(*size);
  return config;
}

namespace {

// The report's newly initialized tensors less those the adapter filled in (trainable after load_adapter).
void drop_filled_by_adapter(Loaded<Model>& out) {
  const StateDict filled = adapter_state_dict(*out.model);
  auto& fresh = out.report.newly_initialized;
  fresh.erase(std::remove_if(fresh.begin(), fresh.end(),
                             [&](const std::string& name) { return filled.count("base_model.model." + name) > 0; }),
              fresh.end());
}

}  // namespace

Loaded<Model> load_pretrained_with_adapter(const fs::path& base_dir, const fs::path& adapter_dir, const io::HfConfig& config) {
  Loaded<Model> out;
  out.model = build_model(config);
  StateDict weights = read_weights(base_dir);
  drop_resized_head(*out.model, weights);
  out.report = load_state_dict(*out.model, weights, base_dir.string());
  (void)load_adapter(*out.model, adapter_dir);
  drop_filled_by_adapter(out);
  return out;
}

Loaded<Model> load_quantized_with_adapter(const fs::path& base_dir, const fs::path& adapter_dir,
                                          const io::HfConfig& config, const Quant4Options& quant, std::string* summary) {
  const core::LiveTensorResidency residency;  // freed float32 layers leave the resident set (Note [Host allocator])
  Loaded<Model> out;
  out.model = build_seeded_model(config, /*seed=*/0, /*keep_deferred=*/true);
  out.report = defer_pretrained_weights(*out.model, base_dir, /*drop_resized=*/true);
  (void)attach_adapter(*out.model, adapter_dir);
  const QuantizedBase quantized = quantize_frozen_base(*out.model, quant);  // materializes the whole model
  if (summary != nullptr) *summary = quantized.summary();
  load_adapter_weights(*out.model, adapter_dir);
  drop_filled_by_adapter(out);
  return out;
}

}  // namespace hpctrain::models
