// BertForSequenceClassification as transformers' modeling_bert.py: same modules and parameter names
// (bert.embeddings.*, bert.encoder.layer.N.attention.self.query, ...attention.output.dense,
// ...intermediate.dense, ...output.LayerNorm, bert.pooler.dense, classifier), same numerics (absolute
// position embeddings, token types default 0, exact GELU, additive (1 - mask) * finfo.min mask).
// Not here: relative position embeddings, decoder/cross-attention, head_mask, past key values.
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

class BertEmbeddings : public torch::nn::Module {
 public:
  explicit BertEmbeddings(const io::BertConfig& config);
  // input_ids int64 [B, L]; token_type_ids int64 [B, L] or undefined (zeros) -> [B, L, hidden]
  at::Tensor forward(const at::Tensor& input_ids, const at::Tensor& token_type_ids);

  torch::nn::Embedding word_embeddings{nullptr}, position_embeddings{nullptr}, token_type_embeddings{nullptr};
  torch::nn::LayerNorm layer_norm{nullptr};  // "LayerNorm"

 private:
  double dropout_;
};

class BertSelfAttention : public torch::nn::Module {
 public:
  explicit BertSelfAttention(const io::BertConfig& config);
  at::Tensor forward(const at::Tensor& hidden, const LayerContext& context);

  LoraLinear query{nullptr}, key{nullptr}, value{nullptr};

 private:
  int64_t heads_;
  double dropout_;
};

// transformers' BertSelfOutput and BertOutput: LayerNorm(dropout(dense(x)) + residual).
class BertResidualOutput : public torch::nn::Module {
 public:
  BertResidualOutput(const io::BertConfig& config, int64_t in_features);
  at::Tensor forward(const at::Tensor& x, const at::Tensor& residual);

  LoraLinear dense{nullptr};
  torch::nn::LayerNorm layer_norm{nullptr};  // "LayerNorm"

 private:
  double dropout_;
};

class BertLayer : public TransformerLayer {
 public:
  explicit BertLayer(const io::BertConfig& config);
  at::Tensor forward(const at::Tensor& hidden, const LayerContext& context) override;

  std::shared_ptr<BertSelfAttention> self_attention;      // "attention.self"
  std::shared_ptr<BertResidualOutput> attention_output;   // "attention.output"
  LoraLinear intermediate{nullptr};                // "intermediate.dense"
  std::shared_ptr<BertResidualOutput> output;             // "output"

 private:
  io::Activation activation_;
};

// BertModel: embeddings, encoder.layer.N, pooler.dense (the classifier runs the layers, so that a
// LayerRunner can wrap each one).
class BertModel : public torch::nn::Module {
 public:
  explicit BertModel(const io::BertConfig& config);

  std::shared_ptr<BertEmbeddings> embeddings;
  std::vector<std::shared_ptr<BertLayer>> layers;  // registered as encoder.layer.N
  LoraLinear pooler{nullptr};               // "pooler.dense"; tanh(dense(hidden[:, 0]))
};

class BertForSequenceClassification : public SequenceClassifier {
 public:
  // Builds the modules from config.bert() and initializes them with init_weights().
  explicit BertForSequenceClassification(io::HfConfig config);

  // pooler (tanh(dense(hidden[:, 0]))) -> dropout -> classifier.
  ModelOutput forward(const ModelInputs& inputs) override;
  [[nodiscard]] const ModelSpec& spec() const override;
  void init_weights() override;
  [[nodiscard]] std::vector<TransformerLayer*> transformer_layers() override;
  [[nodiscard]] torch::nn::EmbeddingImpl* input_embeddings() override;
  [[nodiscard]] std::vector<torch::nn::Module*> unit_modules(UnitKind kind) override;

  std::shared_ptr<BertModel> bert;
  LoraLinear classifier{nullptr};

 private:
  io::BertConfig settings_;  // a copy of config().bert()
};

}  // namespace hpctrain::models
