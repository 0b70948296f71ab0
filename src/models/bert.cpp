// BertForSequenceClassification (see bert.hpp).
#include "hpctrain/models/bert.hpp"

#include "hpctrain/core/error.hpp"
#include "hpctrain/models/materialize.hpp"
#include "hpctrain/models/quantized_embedding.hpp"
#include "models/attention.hpp"
#include "models/dropout.hpp"
#include "models/layers.hpp"

#include <ATen/ATen.h>
#include <torch/nn/modules/container/modulelist.h>

namespace hpctrain::models {

namespace {

torch::nn::LayerNorm make_layer_norm(const io::BertConfig& s) {
  return torch::nn::LayerNorm(torch::nn::LayerNormOptions({s.hidden_size}).eps(s.layer_norm_eps));
}

// A module that only names its children (transformers' BertAttention, BertIntermediate, BertPooler...).
std::shared_ptr<torch::nn::Module> scope(torch::nn::Module& parent, const std::string& name) {
  return parent.register_module(name, std::make_shared<torch::nn::Module>(name));
}

}  // namespace

BertEmbeddings::BertEmbeddings(const io::BertConfig& s) : dropout_(s.hidden_dropout_prob) {
  torch::nn::EmbeddingOptions words(s.vocab_size, s.hidden_size);
  if (s.pad_token_id) words.padding_idx(*s.pad_token_id);
  word_embeddings = register_module("word_embeddings", torch::nn::Embedding(words));
  position_embeddings =
      register_module("position_embeddings", torch::nn::Embedding(s.max_position_embeddings, s.hidden_size));
  token_type_embeddings =
      register_module("token_type_embeddings", torch::nn::Embedding(s.type_vocab_size, s.hidden_size));
  layer_norm = register_module("LayerNorm", make_layer_norm(s));
}

at::Tensor BertEmbeddings::forward(const at::Tensor& input_ids, const at::Tensor& token_type_ids) {
  const int64_t length = input_ids.size(1);
  const int64_t max_positions = position_embeddings->weight.size(0);
  HPCTRAIN_CHECK(length <= max_positions,
                 "BERT: sequence length {} exceeds max_position_embeddings {}; truncate the input", length,
                 max_positions);
  const auto long_options = input_ids.options().dtype(at::kLong);
  at::Tensor x = embedding_lookup(word_embeddings, input_ids);
  if (token_type_ids.defined()) {
    HPCTRAIN_CHECK(token_type_ids.sizes() == input_ids.sizes(),
                   "BERT: token_type_ids must have the shape of input_ids {}, got {}", c10::str(input_ids.sizes()),
                   c10::str(token_type_ids.sizes()));
    x = x + token_type_embeddings->forward(token_type_ids);
  } else {
    x = x + token_type_embeddings->forward(at::zeros({1, 1}, long_options));  // row 0, broadcast
  }
  x = x + position_embeddings->forward(at::arange(length, long_options).unsqueeze(0));
  x = detail::norm_in_fp32(layer_norm, x);
  return detail::seeded_dropout(x, dropout_, is_training());
}

BertSelfAttention::BertSelfAttention(const io::BertConfig& s)
    : heads_(s.num_attention_heads), dropout_(s.attention_probs_dropout_prob) {
  query = register_module("query", LoraLinear(s.hidden_size, s.hidden_size));
  key = register_module("key", LoraLinear(s.hidden_size, s.hidden_size));
  value = register_module("value", LoraLinear(s.hidden_size, s.hidden_size));
}

at::Tensor BertSelfAttention::forward(const at::Tensor& hidden, const LayerContext& context) {
  return detail::self_attention(query->forward(hidden), key->forward(hidden), value->forward(hidden), context.key_mask,
                                heads_, dropout_, is_training());
}

BertResidualOutput::BertResidualOutput(const io::BertConfig& s, int64_t in_features)
    : dropout_(s.hidden_dropout_prob) {
  dense = register_module("dense", LoraLinear(in_features, s.hidden_size));
  layer_norm = register_module("LayerNorm", make_layer_norm(s));
}

at::Tensor BertResidualOutput::forward(const at::Tensor& x, const at::Tensor& residual) {
  at::Tensor h = dense->forward(x);
  h = detail::seeded_dropout(h, dropout_, is_training());
  return detail::norm_in_fp32(layer_norm, h + residual);
}

BertLayer::BertLayer(const io::BertConfig& s) : activation_(s.activation_fn()) {
  auto attention = scope(*this, "attention");
  self_attention = attention->register_module("self", std::make_shared<BertSelfAttention>(s));
  attention_output = attention->register_module("output", std::make_shared<BertResidualOutput>(s, s.hidden_size));
  intermediate = scope(*this, "intermediate")
                     ->register_module("dense", LoraLinear(s.hidden_size, s.intermediate_size));
  output = register_module("output", std::make_shared<BertResidualOutput>(s, s.intermediate_size));
}

at::Tensor BertLayer::forward(const at::Tensor& hidden, const LayerContext& context) {
  const at::Tensor attended = attention_output->forward(self_attention->forward(hidden, context), hidden);
  return output->forward(detail::activate(intermediate->forward(attended), activation_), attended);
}

BertModel::BertModel(const io::BertConfig& s) {
  // Note [Deferred materialization]: each part's memory released once built, inside a DeferredParameters scope.
  embeddings = register_module("embeddings", std::make_shared<BertEmbeddings>(s));
  defer_parameters(*embeddings);
  torch::nn::ModuleList layer_list;
  for (int64_t i = 0; i < s.num_hidden_layers; ++i) {
    layers.push_back(std::make_shared<BertLayer>(s));
    defer_parameters(*layers.back());
    layer_list->push_back(layers.back());
  }
  scope(*this, "encoder")->register_module("layer", layer_list);
  pooler = scope(*this, "pooler")->register_module("dense", LoraLinear(s.hidden_size, s.hidden_size));
  defer_parameters(*pooler);
}

BertForSequenceClassification::BertForSequenceClassification(io::HfConfig config)
    : SequenceClassifier("BertForSequenceClassification", std::move(config)), settings_(this->config().bert()) {
  const io::BertConfig& s = settings_;
  HPCTRAIN_CHECK(s.num_attention_heads > 0 && s.hidden_size % s.num_attention_heads == 0,
                 "BERT config: num_attention_heads {} must divide hidden_size {} evenly", s.num_attention_heads,
                 s.hidden_size);
  bert = register_module("bert", std::make_shared<BertModel>(s));
  classifier = register_module("classifier", LoraLinear(s.hidden_size, num_labels()));
  defer_parameters(*classifier);
  init_weights();
}

void BertForSequenceClassification::init_weights() {
  detail::init_like_transformers(*this, settings_.initializer_range);
}

ModelOutput BertForSequenceClassification::forward(const ModelInputs& inputs) {
  HPCTRAIN_CHECK(inputs.input_ids.defined() && inputs.input_ids.dim() == 2,
                 "BERT: input_ids must be an int64 tensor [batch, sequence]");
  at::Tensor hidden = run_unit(UnitKind::embeddings, inputs.input_ids, [&](const at::Tensor& ids) {
    return bert->embeddings->forward(ids, inputs.token_type_ids);
  });
  const LayerContext context = LayerContext::of(inputs);
  for (const auto& layer : bert->layers) hidden = run_layer(*layer, hidden, context);
  ModelOutput out;
  out.logits = run_unit(UnitKind::head, hidden, [&](const at::Tensor& last) {
    const at::Tensor pooled = at::tanh(bert->pooler->forward(last.select(1, 0)));
    return classifier->forward(detail::seeded_dropout(pooled, settings_.effective_classifier_dropout(), is_training()));
  });
  if (inputs.labels.defined()) out.loss = classification_loss(out.logits, inputs.labels, config().common.problem_type);
  return out;
}

const ModelSpec& BertForSequenceClassification::spec() const {
  // Note [Base checkpoints]: BertForMaskedLM has no pooler; BertForPreTraining carries cls.predictions
  // and cls.seq_relationship; older exports carry the position_ids buffer.
  static const ModelSpec spec{"bert",
                              "BertForSequenceClassification",
                              "bert",
                              {"bert.pooler", "classifier"},
                              {"cls."},
                              {"embeddings.position_ids", "embeddings.token_type_ids"}};
  return spec;
}

torch::nn::EmbeddingImpl* BertForSequenceClassification::input_embeddings() { return bert->embeddings->word_embeddings.get(); }

std::vector<torch::nn::Module*> BertForSequenceClassification::unit_modules(UnitKind kind) {
  if (kind == UnitKind::embeddings) return {bert->embeddings.get()};
  return {bert->pooler.get(), classifier.get()};
}

std::vector<TransformerLayer*> BertForSequenceClassification::transformer_layers() {
  std::vector<TransformerLayer*> out;
  for (const auto& layer : bert->layers) out.push_back(layer.get());
  return out;
}

}  // namespace hpctrain::models
