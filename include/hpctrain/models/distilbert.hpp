// DistilBertForSequenceClassification as transformers' modeling_distilbert.py: same modules, same
// parameter names (distilbert.embeddings.word_embeddings.weight, ...transformer.layer.N.attention.q_lin,
// ..., pre_classifier, classifier), same numerics (exact GELU, LayerNorm eps 1e-12, padded keys masked
// with the dtype's lowest value). Not here: head pruning, head_mask, output_attentions/hidden_states.
#pragma once

#include "hpctrain/models/lora.hpp"

#include "hpctrain/models/model.hpp"

#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>

#include <cstdint>
#include <memory>
#include <vector>

namespace hpctrain::models {

class DistilBertEmbeddings : public torch::nn::Module {
 public:
  explicit DistilBertEmbeddings(const io::DistilBertConfig& config);
  // input_ids int64 [B, L] -> [B, L, dim]
  at::Tensor forward(const at::Tensor& input_ids);

  torch::nn::Embedding word_embeddings{nullptr};
  torch::nn::Embedding position_embeddings{nullptr};
  torch::nn::LayerNorm layer_norm{nullptr};  // registered as "LayerNorm"

 private:
  double dropout_;
};

class DistilBertAttention : public torch::nn::Module {  // transformers' MultiHeadSelfAttention
 public:
  explicit DistilBertAttention(const io::DistilBertConfig& config);
  at::Tensor forward(const at::Tensor& hidden, const LayerContext& context);

  LoraLinear q_lin{nullptr}, k_lin{nullptr}, v_lin{nullptr}, out_lin{nullptr};

 private:
  int64_t heads_;
  double dropout_;
};

class DistilBertFFN : public torch::nn::Module {
 public:
  explicit DistilBertFFN(const io::DistilBertConfig& config);
  at::Tensor forward(const at::Tensor& hidden);

  LoraLinear lin1{nullptr}, lin2{nullptr};

 private:
  io::Activation activation_;
  double dropout_;
};

class DistilBertLayer : public TransformerLayer {  // transformers' TransformerBlock
 public:
  explicit DistilBertLayer(const io::DistilBertConfig& config);
  at::Tensor forward(const at::Tensor& hidden, const LayerContext& context) override;

  std::shared_ptr<DistilBertAttention> attention;
  torch::nn::LayerNorm sa_layer_norm{nullptr};
  std::shared_ptr<DistilBertFFN> ffn;
  torch::nn::LayerNorm output_layer_norm{nullptr};
};

// DistilBertModel: embeddings + transformer.layer.N (the classifier runs the layers, so that a
// LayerRunner can wrap each one).
class DistilBertModel : public torch::nn::Module {
 public:
  explicit DistilBertModel(const io::DistilBertConfig& config);

  std::shared_ptr<DistilBertEmbeddings> embeddings;
  std::vector<std::shared_ptr<DistilBertLayer>> layers;  // registered as transformer.layer.N
};

class DistilBertForSequenceClassification : public SequenceClassifier {
 public:
  // Builds the modules from config.distilbert() and initializes them with init_weights().
  explicit DistilBertForSequenceClassification(io::HfConfig config);

  // hidden[:, 0] -> pre_classifier -> ReLU -> dropout -> classifier.
  ModelOutput forward(const ModelInputs& inputs) override;
  [[nodiscard]] const ModelSpec& spec() const override;
  void init_weights() override;
  [[nodiscard]] std::vector<TransformerLayer*> transformer_layers() override;
  [[nodiscard]] torch::nn::EmbeddingImpl* input_embeddings() override;
  [[nodiscard]] std::vector<torch::nn::Module*> unit_modules(UnitKind kind) override;

  std::shared_ptr<DistilBertModel> distilbert;
  LoraLinear pre_classifier{nullptr}, classifier{nullptr};

 private:
  io::DistilBertConfig settings_;  // a copy of config().distilbert()
};

}  // namespace hpctrain::models
