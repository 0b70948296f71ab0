// Explicit model registry: config.json "model_type" -> builder, one table (registry.cpp).
//   distilbert    DistilBertForSequenceClassification   (sequence classifier)
//   bert          BertForSequenceClassification         (sequence classifier)
//   hpctrain-cnn  CnnClassifier                         (sequence classifier)
//   hpctrain-mlp  MlpClassifier                         (sequence classifier)
//   gpt2          GPT2LMHeadModel                       (causal LM)
//   llama         LlamaForCausalLM                      (causal LM)
//   qwen2         Qwen2ForCausalLM                      (causal LM)
#pragma once

#include "hpctrain/io/hf_config.hpp"
#include "hpctrain/models/causal_lm.hpp"
#include "hpctrain/models/model.hpp"

#include <memory>
#include <string>
#include <vector>

namespace hpctrain::models {

// What a model type builds (the Model subclass its forward's outputs follow).
enum class ModelKind { sequence_classifier, causal_lm };

// A freshly initialized model of any kind (transformers' _init_weights; PyTorch defaults for vision) that
// keeps `config` (Model::config). Draws from LibTorch's default generator: call torch::manual_seed(seed)
// first for reproducible weights. Error on an unknown model_type, listing the known ones.
[[nodiscard]] std::shared_ptr<Model> build_model(const io::HfConfig& config);

// build_model for callers that need a classifier: Error naming the model_type when it builds another kind.
[[nodiscard]] std::shared_ptr<SequenceClassifier> from_config(const io::HfConfig& config);

// build_model for callers that need a causal LM: Error naming the model_type when it builds another kind.
[[nodiscard]] std::shared_ptr<CausalLM> causal_lm_from_config(const io::HfConfig& config);

// The kind `model_type` builds; Error as build_model's on an unknown one.
[[nodiscard]] ModelKind model_kind(const std::string& model_type);

// The registered model types, sorted: "bert", "distilbert", "gpt2", "hpctrain-cnn", "hpctrain-mlp", "llama",
// "qwen2".
[[nodiscard]] std::vector<std::string> known_model_types();

}  // namespace hpctrain::models
