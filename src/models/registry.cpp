// The model registry (registry.hpp).
#include "hpctrain/models/registry.hpp"

#include "hpctrain/core/error.hpp"
#include "hpctrain/core/memory_info.hpp"
#include "hpctrain/models/bert.hpp"
#include "hpctrain/models/distilbert.hpp"
#include "hpctrain/models/gpt2.hpp"
#include "hpctrain/models/llama.hpp"
#include "hpctrain/models/model_size.hpp"
#include "hpctrain/models/vision.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <functional>
#include <map>
#include <type_traits>

namespace hpctrain::models {

namespace {

using Builder = std::function<std::shared_ptr<Model>(const io::HfConfig&)>;

struct Entry {
  ModelKind kind;
  Builder build;
};

template <typename ModelClass>
Entry entry() {
  static_assert(std::is_base_of_v<CausalLM, ModelClass> || std::is_base_of_v<SequenceClassifier, ModelClass>,
                "a registered model is a SequenceClassifier or a CausalLM (ModelKind)");
  constexpr ModelKind kind =
      std::is_base_of_v<CausalLM, ModelClass> ? ModelKind::causal_lm : ModelKind::sequence_classifier;
  return {kind, [](const io::HfConfig& config) { return std::make_shared<ModelClass>(config); }};
}

// The one table of model types. A function-local static: built once, thread-safe, no global
// constructor order to worry about.
const std::map<std::string, Entry>& registry() {
  static const std::map<std::string, Entry> table = {
      {"distilbert", entry<DistilBertForSequenceClassification>()},
      {"bert", entry<BertForSequenceClassification>()},
      {"hpctrain-cnn", entry<CnnClassifier>()},
      {"hpctrain-mlp", entry<MlpClassifier>()},
      {"gpt2", entry<GPT2LMHeadModel>()},
      {"llama", entry<LlamaForCausalLM>()},
      {"qwen2", entry<LlamaForCausalLM>()},  // Qwen2ForCausalLM: Llama's network with q/k/v bias
  };
  return table;
}

const Entry& entry_of(const std::string& model_type) {
  const auto& table = registry();
  const auto it = table.find(model_type);
  HPCTRAIN_CHECK(it != table.end(), "config.json model_type \"{}\" has no model in hpctrain; known model types: {}",
                 model_type, fmt::join(known_model_types(), ", "));
  return it->second;
}

const char* kind_name(ModelKind kind) {
  return kind == ModelKind::causal_lm ? "a causal language model" : "a sequence classifier";
}

// The model types of one kind, for messages.
std::string types_of(ModelKind kind) {
  std::vector<std::string> out;
  for (const auto& [type, item] : registry())
    if (item.kind == kind) out.push_back(type);
  return fmt::format("{}", fmt::join(out, ", "));
}

void require_kind(const io::HfConfig& config, ModelKind wanted) {
  const ModelKind kind = entry_of(config.model_type()).kind;
  HPCTRAIN_CHECK(kind == wanted, "{}: model_type \"{}\" builds {}, but {} is needed here (model_type {})",
                 config.source(), config.model_type(), kind_name(kind), kind_name(wanted), types_of(wanted));
}

}  // namespace

std::vector<std::string> known_model_types() {
  std::vector<std::string> out;
  for (const auto& item : registry()) out.push_back(item.first);
  return out;
}

ModelKind model_kind(const std::string& model_type) { return entry_of(model_type).kind; }

std::shared_ptr<Model> build_model(const io::HfConfig& config) {
  const Entry& item = entry_of(config.model_type());
  check_model_fits_host(config, 1, config.source(), "building the model");  // Note [Size before building]
  try {
    return item.build(config);
  } catch (const std::exception& error) {  // the estimate fitted, but a limit or other processes left less
    if (!core::is_allocation_failure(error)) throw;
    fail("{}: building the model of {} parameters {}", config.source(), estimate_model_size(config).parameters,
         core::describe_allocation_failure(error));
  }
}

std::shared_ptr<SequenceClassifier> from_config(const io::HfConfig& config) {
  require_kind(config, ModelKind::sequence_classifier);
  return std::static_pointer_cast<SequenceClassifier>(build_model(config));
}

std::shared_ptr<CausalLM> causal_lm_from_config(const io::HfConfig& config) {
  require_kind(config, ModelKind::causal_lm);
  return std::static_pointer_cast<CausalLM>(build_model(config));
}

}  // namespace hpctrain::models
