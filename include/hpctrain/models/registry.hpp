// Explicit model registry: config.json "model_type" -> builder, one table (registry.cpp).
//   distilbert    DistilBertForSequenceClassification
//   bert          BertForSequenceClassification
//   hpctrain-cnn  CnnClassifier
//   hpctrain-mlp  MlpClassifier
#pragma once

#include "hpctrain/io/hf_config.hpp"
#include "hpctrain/models/model.hpp"

#include <memory>
#include <string>
#include <vector>

namespace hpctrain::models {

// A freshly initialized model (transformers' _init_weights; PyTorch defaults for vision) that keeps
// `config` (SequenceClassifier::config). Draws from LibTorch's default generator: call
// torch::manual_seed(seed) first for reproducible weights. Error on an unknown model_type, listing
// the known ones.
[[nodiscard]] std::shared_ptr<SequenceClassifier> from_config(const io::HfConfig& config);

// The registered model types, sorted: "bert", "distilbert", "hpctrain-cnn", "hpctrain-mlp".
[[nodiscard]] std::vector<std::string> known_model_types();

}  // namespace hpctrain::models
