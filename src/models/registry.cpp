// The model registry (registry.hpp).
#include "hpctrain/models/registry.hpp"

#include "hpctrain/core/error.hpp"
#include "hpctrain/core/memory_info.hpp"
#include "hpctrain/models/bert.hpp"
#include "hpctrain/models/distilbert.hpp"
#include "hpctrain/models/model_size.hpp"
#include "hpctrain/models/vision.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <functional>
#include <map>

namespace hpctrain::models {

namespace {

using Builder = std::function<std::shared_ptr<SequenceClassifier>(const io::HfConfig&)>;

template <typename Model>
Builder builder() {
  return [](const io::HfConfig& config) { return std::make_shared<Model>(config); };
}

// The one table of model types. A function-local static: built once, thread-safe, no global
// constructor order to worry about.
const std::map<std::string, Builder>& registry() {
  static const std::map<std::string, Builder> table = {
      {"distilbert", builder<DistilBertForSequenceClassification>()},
      {"bert", builder<BertForSequenceClassification>()},
      {"hpctrain-cnn", builder<CnnClassifier>()},
      {"hpctrain-mlp", builder<MlpClassifier>()},
  };
  return table;
}

}  // namespace

std::vector<std::string> known_model_types() {
  std::vector<std::string> out;
  for (const auto& item : registry()) out.push_back(item.first);
  return out;
}

std::shared_ptr<SequenceClassifier> from_config(const io::HfConfig& config) {
  const auto& table = registry();
  const auto it = table.find(config.model_type());
  HPCTRAIN_CHECK(it != table.end(), "config.json model_type \"{}\" has no model in hpctrain; known model types: {}",
                 config.model_type(), fmt::join(known_model_types(), ", "));
  check_model_fits_host(config, 1, config.source(), "building the model");  // Note [Size before building]
  try {
    return it->second(config);
  } catch (const std::exception& error) {  // the estimate fitted, but a limit or other processes left less
    if (!core::is_allocation_failure(error)) throw;
    fail("{}: building the model of {} parameters {}", config.source(), estimate_model_size(config).parameters,
         core::describe_allocation_failure(error));
  }
}

}  // namespace hpctrain::models
