// LlamaForCausalLM / Qwen2ForCausalLM (see llama.hpp).
#include "hpctrain/models/llama.hpp"

#include "hpctrain/compat/torch.hpp"
#include "hpctrain/core/error.hpp"
#include "hpctrain/models/materialize.hpp"
#include "hpctrain/models/quantized_embedding.hpp"
#include "models/attention.hpp"
#include "models/decoder.hpp"
#include "models/layers.hpp"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <torch/nn/modules/container/modulelist.h>

#include <cmath>
#include <optional>
#include <tuple>

namespace hpctrain::models {

namespace {

// transformers' _compute_llama3_parameters, in float32 as there: long wavelengths divided by `factor`, short
// ones kept, the band between interpolated smoothly.
at::Tensor llama3_frequencies(const at::Tensor& inv_freq, const io::RopeConfig& rope) {
  const double old_context = static_cast<double>(rope.original_max_position_embeddings);
  const double low_freq_wavelen = old_context / rope.low_freq_factor;
  const double high_freq_wavelen = old_context / rope.high_freq_factor;
  const at::Tensor wavelen = 2 * M_PI / inv_freq;
  at::Tensor scaled = at::where(wavelen > low_freq_wavelen, inv_freq / rope.factor, inv_freq);
  const at::Tensor smooth =
      (old_context / wavelen - rope.low_freq_factor) / (rope.high_freq_factor - rope.low_freq_factor);
  const at::Tensor smoothed = (1 - smooth) * scaled / rope.factor + smooth * scaled;
  const at::Tensor medium = wavelen.ge(high_freq_wavelen).logical_and(wavelen.le(low_freq_wavelen));
  return at::where(medium, smoothed, scaled);
}

// The second half negated and moved first: transformers' rotate_half.
at::Tensor rotate_half(const at::Tensor& x) {
  const int64_t half = x.size(-1) / 2;
  return at::cat({x.slice(-1, half).neg(), x.slice(-1, 0, half)}, -1);
}

LoraLinear make_linear(int64_t in, int64_t out, bool bias) {
  return LoraLinear(torch::nn::LinearOptions(in, out).bias(bias));
}

}  // namespace

RotaryEmbedding::RotaryEmbedding(const io::RopeConfig& rope, int64_t head_dim) {
  // transformers' default: 1 / theta^(2i / d) with the exponent in float32.
  const at::Tensor exponent = at::arange(0, head_dim, 2, at::kLong).to(at::kFloat) / static_cast<double>(head_dim);
  inv_freq_ = at::pow(rope.theta, exponent).reciprocal();
  if (rope.type == "linear") inv_freq_ = inv_freq_ / rope.factor;
  if (rope.type == "llama3") inv_freq_ = llama3_frequencies(inv_freq_, rope);
  HPCTRAIN_CHECK(rope.type == "default" || rope.type == "linear" || rope.type == "llama3",
                 "rotary embeddings: rope_type \"{}\" is not implemented", rope.type);
}

at::Tensor RotaryEmbedding::rotate(const at::Tensor& x, int64_t first_position) const {
  const int64_t length = x.size(1);
  return rotate(x, at::arange(first_position, first_position + length, x.options().dtype(at::kLong)).unsqueeze(0));
}

at::Tensor RotaryEmbedding::rotate(const at::Tensor& x, const at::Tensor& positions) const {
  if (!positions.defined()) return rotate(x, int64_t{0});
  const int64_t rows = positions.size(0), length = x.size(1);
  HPCTRAIN_CHECK(positions.dim() == 2 && (rows == 1 || rows == x.size(0)) && positions.size(1) == length,
                 "rotary embeddings: positions must be [B, L] = [{}, {}], got {}", x.size(0), length,
                 c10::str(positions.sizes()));
  at::Tensor cos, sin;
  {
    // Angles in float32 even inside an autocast region, as transformers' LlamaRotaryEmbedding.
    std::optional<compat::AutocastScope> fp32;
    if (compat::AutocastScope::is_enabled(x.device().type())) fp32.emplace(x.device().type(), /*enabled=*/false);
    const at::Tensor at_position = positions.to(x.device(), at::kFloat).unsqueeze(-1);  // [rows, L, 1]
    const at::Tensor freqs = at_position * inv_freq_.to(x.device());                  // [rows, L, d/2]: pos * inv_freq
    const at::Tensor angles = at::cat({freqs, freqs}, -1).view({rows, length, 1, x.size(-1)});
    cos = angles.cos().to(x.scalar_type());
    sin = angles.sin().to(x.scalar_type());
  }
  return x * cos + rotate_half(x) * sin;
}

LlamaRMSNorm::LlamaRMSNorm(int64_t size, double eps) : eps_(eps) {
  weight = register_parameter("weight", at::ones({size}));
}

at::Tensor LlamaRMSNorm::forward(const at::Tensor& x) {
  const at::Tensor x32 = x.to(at::kFloat);
  const at::Tensor normed = x32 * at::rsqrt(x32.pow(2).mean(-1, /*keepdim=*/true) + eps_);
  return weight * normed.to(x.scalar_type());
}

LlamaAttention::LlamaAttention(const io::LlamaConfig& s, bool qkv_bias, bool o_bias,
                               std::shared_ptr<const RotaryEmbedding> rotary)
    : heads_(s.num_attention_heads),
      kv_heads_(s.kv_heads()),
      head_dim_(s.head_size()),
      dropout_(s.attention_dropout),
      rotary_(std::move(rotary)) {
  q_proj = register_module("q_proj", make_linear(s.hidden_size, heads_ * head_dim_, qkv_bias));
  k_proj = register_module("k_proj", make_linear(s.hidden_size, kv_heads_ * head_dim_, qkv_bias));
  v_proj = register_module("v_proj", make_linear(s.hidden_size, kv_heads_ * head_dim_, qkv_bias));
  o_proj = register_module("o_proj", make_linear(heads_ * head_dim_, s.hidden_size, o_bias));
}

at::Tensor LlamaAttention::forward(const at::Tensor& hidden, const LayerContext& context, LayerKvCache* cache) {
  const int64_t batch = hidden.size(0), length = hidden.size(1);
  // Note [KV cache]: the new tokens' positions follow the cached ones; else the batch's (packed rows: per document).
  const int64_t first = cache != nullptr ? cache->length() : 0;
  const at::Tensor positions = cache != nullptr || !context.positions.defined()
                                   ? at::arange(first, first + length, hidden.options().dtype(at::kLong)).unsqueeze(0)
                                   : context.positions;
  const at::Tensor q = rotary_->rotate(q_proj->forward(hidden).view({batch, length, heads_, head_dim_}), positions);
  at::Tensor k = rotary_->rotate(k_proj->forward(hidden).view({batch, length, kv_heads_, head_dim_}), positions)
                     .reshape({batch, length, kv_heads_ * head_dim_});
  at::Tensor v = v_proj->forward(hidden);
  if (cache != nullptr) std::tie(k, v) = cache->append(k, v);
  const at::Tensor attended = detail::causal_self_attention(
      q.reshape({batch, length, heads_ * head_dim_}), k, v, context.key_mask, heads_, kv_heads_,
      1.0 / std::sqrt(static_cast<double>(head_dim_)), dropout_, is_training(), context.documents);
  return o_proj->forward(attended);
}

LlamaMlp::LlamaMlp(const io::LlamaConfig& s, bool bias) : activation_(s.activation_fn()) {
  gate_proj = register_module("gate_proj", make_linear(s.hidden_size, s.intermediate_size, bias));
  up_proj = register_module("up_proj", make_linear(s.hidden_size, s.intermediate_size, bias));
  down_proj = register_module("down_proj", make_linear(s.intermediate_size, s.hidden_size, bias));
}

at::Tensor LlamaMlp::forward(const at::Tensor& hidden) {
  return down_proj->forward(detail::activate(gate_proj->forward(hidden), activation_) * up_proj->forward(hidden));
}

LlamaDecoderLayer::LlamaDecoderLayer(const io::LlamaConfig& s, bool qwen2,
                                     std::shared_ptr<const RotaryEmbedding> rotary) {
  // Llama: attention_bias on all four projections; Qwen2: on q, k, v only (io::Qwen2Config).
  const bool o_bias = !qwen2 && s.attention_bias;
  self_attn = register_module("self_attn", std::make_shared<LlamaAttention>(s, s.attention_bias, o_bias, rotary));
  mlp = register_module("mlp", std::make_shared<LlamaMlp>(s, !qwen2 && s.mlp_bias));
  input_layernorm = register_module("input_layernorm", std::make_shared<LlamaRMSNorm>(s.hidden_size, s.rms_norm_eps));
  post_attention_layernorm =
      register_module("post_attention_layernorm", std::make_shared<LlamaRMSNorm>(s.hidden_size, s.rms_norm_eps));
}

at::Tensor LlamaDecoderLayer::forward(const at::Tensor& hidden, const LayerContext& context) {
  const at::Tensor attended = hidden + self_attn->forward(input_layernorm->forward(hidden), context);
  return attended + mlp->forward(post_attention_layernorm->forward(attended));
}

at::Tensor LlamaDecoderLayer::forward_cached(const at::Tensor& hidden, LayerKvCache& cache) {
  const at::Tensor attended = hidden + self_attn->forward(input_layernorm->forward(hidden), LayerContext{}, &cache);
  return attended + mlp->forward(post_attention_layernorm->forward(attended));
}

LlamaModel::LlamaModel(const io::LlamaConfig& s, bool qwen2)
    : rotary(std::make_shared<const RotaryEmbedding>(s.rope, s.head_size())) {
  torch::nn::EmbeddingOptions words(s.vocab_size, s.hidden_size);
  if (s.pad_token_id) words.padding_idx(*s.pad_token_id);
  // Note [Deferred materialization]: each part's memory released once built, inside a DeferredParameters scope.
  embed_tokens = register_module("embed_tokens", torch::nn::Embedding(words));
  defer_parameters(*embed_tokens);
  torch::nn::ModuleList layer_list;
  for (int64_t i = 0; i < s.num_hidden_layers; ++i) {
    layers.push_back(std::make_shared<LlamaDecoderLayer>(s, qwen2, rotary));
    defer_parameters(*layers.back());
    layer_list->push_back(layers.back());
  }
  register_module("layers", layer_list);
  norm = register_module("norm", std::make_shared<LlamaRMSNorm>(s.hidden_size, s.rms_norm_eps));
  defer_parameters(*norm);
}

namespace {
bool is_qwen2(const io::HfConfig& config) { return config.model_type() == "qwen2"; }
std::string architecture_of(const io::HfConfig& config) {
  return is_qwen2(config) ? "Qwen2ForCausalLM" : "LlamaForCausalLM";
}
}  // namespace

LlamaForCausalLM::LlamaForCausalLM(io::HfConfig config)
    : CausalLM(architecture_of(config), config),  // a copy: the order of argument evaluation is unspecified
      settings_(this->config().llama_family()),
      spec_(detail::causal_lm_spec(this->config().model_type(), architecture_of(this->config()), "model",
                                   settings_.tie_word_embeddings, {"rotary_emb.inv_freq"})) {  // old exports' buffer
  model = register_module("model", std::make_shared<LlamaModel>(settings_, is_qwen2(this->config())));
  if (!settings_.tie_word_embeddings) {
    lm_head = register_module(
        "lm_head", LoraLinear(torch::nn::LinearOptions(settings_.hidden_size, settings_.vocab_size).bias(false)));
    defer_parameters(*lm_head);
  }
  init_weights();
}

void LlamaForCausalLM::init_weights() {
  detail::init_like_transformers(*this, settings_.initializer_range);  // Linear, Embedding
  at::NoGradGuard no_grad;
  for (const auto& layer : model->layers) {  // Note [Deferred materialization]: what initializes() allows
    for (at::Tensor* weight : {&layer->input_layernorm->weight, &layer->post_attention_layernorm->weight})
      if (initializes(*weight)) weight->fill_(1.0);
  }
  if (initializes(model->norm->weight)) model->norm->weight.fill_(1.0);
}

at::Tensor LlamaForCausalLM::hidden_states(const ModelInputs& inputs) {
  detail::check_causal_inputs(inputs, spec_.architecture.c_str());
  at::Tensor hidden = run_unit(UnitKind::embeddings, inputs.input_ids,
                               [&](const at::Tensor& ids) { return embedding_lookup(model->embed_tokens, ids); });
  const LayerContext context = LayerContext::of(inputs);
  for (const auto& layer : model->layers) hidden = run_layer(*layer, hidden, context);
  return model->norm->forward(hidden);
}

LmHead LlamaForCausalLM::head() { return detail::lm_head(lm_head, model->embed_tokens, is_training()); }

at::Tensor LlamaForCausalLM::forward_cached(const at::Tensor& input_ids, KvCache& cache) {
  detail::check_cached_inputs(input_ids, cache, model->layers.size(), spec_.architecture.c_str());
  at::Tensor hidden = embedding_lookup(model->embed_tokens, input_ids);
  for (size_t i = 0; i < model->layers.size(); ++i) hidden = model->layers[i]->forward_cached(hidden, cache.layer(i));
  return head().logits(model->norm->forward(hidden));
}

const ModelSpec& LlamaForCausalLM::spec() const { return spec_; }

torch::nn::EmbeddingImpl* LlamaForCausalLM::input_embeddings() { return model->embed_tokens.get(); }

std::vector<torch::nn::Module*> LlamaForCausalLM::unit_modules(UnitKind kind) {
  if (kind == UnitKind::embeddings) return {model->embed_tokens.get()};
  return {lm_head.is_empty() ? static_cast<torch::nn::Module*>(model->embed_tokens.get()) : lm_head.get()};  // Note [Tied head]
}

std::vector<TransformerLayer*> LlamaForCausalLM::transformer_layers() {
  std::vector<TransformerLayer*> out;
  for (const auto& layer : model->layers) out.push_back(layer.get());
  return out;
}

}  // namespace hpctrain::models
