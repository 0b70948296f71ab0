// DistilBertForSequenceClassification (see distilbert.hpp).
#include "hpctrain/models/distilbert.hpp"

#include "hpctrain/core/error.hpp"
#include "hpctrain/models/materialize.hpp"
#include "hpctrain/models/quantized_embedding.hpp"
#include "models/attention.hpp"
#include "models/dropout.hpp"
#include "models/layers.hpp"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <torch/nn/modules/container/modulelist.h>

namespace hpctrain::models {

namespace {

torch::nn::LayerNorm make_layer_norm(const io::DistilBertConfig& s) {
  return torch::nn::LayerNorm(torch::nn::LayerNormOptions({s.dim}).eps(io::DistilBertConfig::layer_norm_eps));
}

LoraLinear make_linear(int64_t in, int64_t out) { return LoraLinear(in, out); }

}  // namespace

DistilBertEmbeddings::DistilBertEmbeddings(const io::DistilBertConfig& s) : dropout_(s.dropout) {
  torch::nn::EmbeddingOptions words(s.vocab_size, s.dim);
  if (s.pad_token_id) words.padding_idx(*s.pad_token_id);
  word_embeddings = register_module("word_embeddings", torch::nn::Embedding(words));
  position_embeddings = register_module("position_embeddings", torch::nn::Embedding(s.max_position_embeddings, s.dim));
  layer_norm = register_module("LayerNorm", make_layer_norm(s));
}

at::Tensor DistilBertEmbeddings::forward(const at::Tensor& input_ids) {
  const int64_t length = input_ids.size(1);
  const int64_t max_positions = position_embeddings->weight.size(0);
  HPCTRAIN_CHECK(length <= max_positions,
                 "DistilBERT: sequence length {} exceeds max_position_embeddings {}; truncate the input",
                 length, max_positions);
  const at::Tensor positions = at::arange(length, input_ids.options().dtype(at::kLong)).unsqueeze(0);
  at::Tensor x = embedding_lookup(word_embeddings, input_ids) + position_embeddings->forward(positions);
  x = detail::norm_in_fp32(layer_norm, x);
  return detail::seeded_dropout(x, dropout_, is_training());
}

DistilBertAttention::DistilBertAttention(const io::DistilBertConfig& s)
    : heads_(s.n_heads), dropout_(s.attention_dropout) {
  q_lin = register_module("q_lin", make_linear(s.dim, s.dim));
  k_lin = register_module("k_lin", make_linear(s.dim, s.dim));
  v_lin = register_module("v_lin", make_linear(s.dim, s.dim));
  out_lin = register_module("out_lin", make_linear(s.dim, s.dim));
}

at::Tensor DistilBertAttention::forward(const at::Tensor& hidden, const LayerContext& context) {
  const at::Tensor attended = detail::self_attention(q_lin->forward(hidden), k_lin->forward(hidden),
                                                     v_lin->forward(hidden), context.key_mask, heads_, dropout_,
                                                     is_training());
  return out_lin->forward(attended);
}

DistilBertFFN::DistilBertFFN(const io::DistilBertConfig& s)
    : activation_(s.activation_fn()), dropout_(s.dropout) {
  lin1 = register_module("lin1", make_linear(s.dim, s.hidden_dim));
  lin2 = register_module("lin2", make_linear(s.hidden_dim, s.dim));
}

at::Tensor DistilBertFFN::forward(const at::Tensor& hidden) {
  at::Tensor x = lin2->forward(detail::activate(lin1->forward(hidden), activation_));
  return detail::seeded_dropout(x, dropout_, is_training());
}

DistilBertLayer::DistilBertLayer(const io::DistilBertConfig& s) {
  attention = register_module("attention", std::make_shared<DistilBertAttention>(s));
  sa_layer_norm = register_module("sa_layer_norm", make_layer_norm(s));
  ffn = register_module("ffn", std::make_shared<DistilBertFFN>(s));
  output_layer_norm = register_module("output_layer_norm", make_layer_norm(s));
}

at::Tensor DistilBertLayer::forward(const at::Tensor& hidden, const LayerContext& context) {
  const at::Tensor attended = detail::norm_in_fp32(sa_layer_norm, attention->forward(hidden, context) + hidden);
  return detail::norm_in_fp32(output_layer_norm, ffn->forward(attended) + attended);
}

DistilBertModel::DistilBertModel(const io::DistilBertConfig& s) {
  // Note [Deferred materialization]: each part's memory released once built, inside a DeferredParameters scope.
  embeddings = register_module("embeddings", std::make_shared<DistilBertEmbeddings>(s));
  defer_parameters(*embeddings);
  // transformers' Transformer module only holds the ModuleList "layer".
  auto transformer = register_module("transformer", std::make_shared<torch::nn::Module>("Transformer"));
  torch::nn::ModuleList layer_list;
  for (int64_t i = 0; i < s.n_layers; ++i) {
    layers.push_back(std::make_shared<DistilBertLayer>(s));
    defer_parameters(*layers.back());
    layer_list->push_back(layers.back());
  }
  transformer->register_module("layer", layer_list);
}

DistilBertForSequenceClassification::DistilBertForSequenceClassification(io::HfConfig config)
    : SequenceClassifier("DistilBertForSequenceClassification", std::move(config)),
      settings_(this->config().distilbert()) {
  const io::DistilBertConfig& s = settings_;
  HPCTRAIN_CHECK(s.n_heads > 0 && s.dim % s.n_heads == 0,
                 "DistilBERT config: n_heads {} must divide dim {} evenly", s.n_heads, s.dim);
  distilbert = register_module("distilbert", std::make_shared<DistilBertModel>(s));
  pre_classifier = register_module("pre_classifier", make_linear(s.dim, s.dim));
  defer_parameters(*pre_classifier);
  classifier = register_module("classifier", make_linear(s.dim, num_labels()));
  defer_parameters(*classifier);
  init_weights();
}

void DistilBertForSequenceClassification::init_weights() {
  detail::init_like_transformers(*this, settings_.initializer_range);
  if (settings_.sinusoidal_pos_embds) {
    // A fixed table, not a trained parameter (transformers sets requires_grad = False on it).
    at::Tensor& weight = distilbert->embeddings->position_embeddings->weight;
    at::NoGradGuard no_grad;
    if (initializes(weight))  // Note [Deferred materialization]
      weight.copy_(detail::sinusoidal_table(settings_.max_position_embeddings, settings_.dim));
    weight.set_requires_grad(false);
  }
}

ModelOutput DistilBertForSequenceClassification::forward(const ModelInputs& inputs) {
  HPCTRAIN_CHECK(inputs.input_ids.defined() && inputs.input_ids.dim() == 2,
                 "DistilBERT: input_ids must be an int64 tensor [batch, sequence]");
  at::Tensor hidden = run_unit(UnitKind::embeddings, inputs.input_ids,
                               [&](const at::Tensor& ids) { return distilbert->embeddings->forward(ids); });
  const LayerContext context = LayerContext::of(inputs);
  for (const auto& layer : distilbert->layers) hidden = run_layer(*layer, hidden, context);
  ModelOutput out;
  out.logits = run_unit(UnitKind::head, hidden, [&](const at::Tensor& last) {
    const at::Tensor pooled = at::relu(pre_classifier->forward(last.select(1, 0)));
    return classifier->forward(detail::seeded_dropout(pooled, settings_.seq_classif_dropout, is_training()));
  });
  if (inputs.labels.defined()) out.loss = classification_loss(out.logits, inputs.labels, config().common.problem_type);
  return out;
}

const ModelSpec& DistilBertForSequenceClassification::spec() const {
  // Note [Base checkpoints]: DistilBertForMaskedLM carries vocab_transform/vocab_layer_norm/
  // vocab_projector; older exports carry the position_ids buffer.
  static const ModelSpec spec{"distilbert",
                              "DistilBertForSequenceClassification",
                              "distilbert",
                              {"pre_classifier", "classifier"},
                              {"vocab_transform.", "vocab_layer_norm.", "vocab_projector."},
                              {"embeddings.position_ids"}};
  return spec;
}

torch::nn::EmbeddingImpl* DistilBertForSequenceClassification::input_embeddings() {
  return distilbert->embeddings->word_embeddings.get();
}

std::vector<torch::nn::Module*> DistilBertForSequenceClassification::unit_modules(UnitKind kind) {
  if (kind == UnitKind::embeddings) return {distilbert->embeddings.get()};
  return {pre_classifier.get(), classifier.get()};
}

std::vector<TransformerLayer*> DistilBertForSequenceClassification::transformer_layers() {
  std::vector<TransformerLayer*> out;
  for (const auto& layer : distilbert->layers) out.push_back(layer.get());
  return out;
}

}  // namespace hpctrain::models
