// GPT2LMHeadModel (see gpt2.hpp).
#include "hpctrain/models/gpt2.hpp"

#include "hpctrain/core/error.hpp"
#include "hpctrain/models/materialize.hpp"
#include "hpctrain/models/quantized_embedding.hpp"
#include "models/attention.hpp"
#include "models/decoder.hpp"
#include "models/dropout.hpp"
#include "models/layers.hpp"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <torch/nn/modules/container/modulelist.h>

#include <cmath>
#include <tuple>

namespace hpctrain::models {

namespace {

torch::nn::LayerNorm make_layer_norm(const io::Gpt2Config& s) {
  return torch::nn::LayerNorm(torch::nn::LayerNormOptions({s.n_embd}).eps(s.layer_norm_epsilon));
}

}  // namespace

Gpt2Conv1D::Gpt2Conv1D(int64_t in_features, int64_t out_features) {
  weight = register_parameter("weight", at::empty({in_features, out_features}));  // Note [Conv1D weights]
  bias = register_parameter("bias", at::zeros({out_features}));
}

at::Tensor Gpt2Conv1D::forward(const at::Tensor& x) {
  // As transformers' Conv1D (addmm also under autocast, so bf16 regions cast the bias as there); a quantized base
  // computes x Wᵀ + b from W [out, in] (Note [Quantized base]).
  if (base_quantized()) return with_lora(quantized_base_output(x, bias), x, is_training());
  std::vector<int64_t> shape = x.sizes().vec();
  shape.back() = weight.size(1);
  return with_lora(at::addmm(bias, x.reshape({-1, x.size(-1)}), weight).view(shape), x, is_training());
}

Gpt2Attention::Gpt2Attention(const io::Gpt2Config& s)
    : heads_(s.n_head),
      scale_(s.scale_attn_weights ? 1.0 / std::sqrt(static_cast<double>(s.n_embd / s.n_head)) : 1.0),
      attn_dropout_(s.attn_pdrop),
      resid_dropout_(s.resid_pdrop) {
  c_attn = register_module("c_attn", std::make_shared<Gpt2Conv1D>(s.n_embd, 3 * s.n_embd));
  c_proj = register_module("c_proj", std::make_shared<Gpt2Conv1D>(s.n_embd, s.n_embd));
}

at::Tensor Gpt2Attention::forward(const at::Tensor& hidden, const LayerContext& context, LayerKvCache* cache) {
  std::vector<at::Tensor> qkv = c_attn->forward(hidden).chunk(3, -1);
  if (cache != nullptr) std::tie(qkv[1], qkv[2]) = cache->append(qkv[1], qkv[2]);  // Note [KV cache]
  const at::Tensor attended = detail::causal_self_attention(qkv[0], qkv[1], qkv[2], context.key_mask, heads_, heads_,
                                                            scale_, attn_dropout_, is_training(), context.documents);
  return detail::seeded_dropout(c_proj->forward(attended), resid_dropout_, is_training());
}

Gpt2Mlp::Gpt2Mlp(const io::Gpt2Config& s) : activation_(s.activation_fn()), dropout_(s.resid_pdrop) {
  c_fc = register_module("c_fc", std::make_shared<Gpt2Conv1D>(s.n_embd, s.inner_size()));
  c_proj = register_module("c_proj", std::make_shared<Gpt2Conv1D>(s.inner_size(), s.n_embd));
}

at::Tensor Gpt2Mlp::forward(const at::Tensor& hidden) {
  const at::Tensor x = c_proj->forward(detail::activate(c_fc->forward(hidden), activation_));
  return detail::seeded_dropout(x, dropout_, is_training());
}

Gpt2Block::Gpt2Block(const io::Gpt2Config& s) {
  ln_1 = register_module("ln_1", make_layer_norm(s));
  attn = register_module("attn", std::make_shared<Gpt2Attention>(s));
  ln_2 = register_module("ln_2", make_layer_norm(s));
  mlp = register_module("mlp", std::make_shared<Gpt2Mlp>(s));
}

at::Tensor Gpt2Block::forward(const at::Tensor& hidden, const LayerContext& context) {
  const at::Tensor attended = hidden + attn->forward(detail::norm_in_fp32(ln_1, hidden), context);
  return attended + mlp->forward(detail::norm_in_fp32(ln_2, attended));
}

at::Tensor Gpt2Block::forward_cached(const at::Tensor& hidden, LayerKvCache& cache) {
  const at::Tensor attended = hidden + attn->forward(detail::norm_in_fp32(ln_1, hidden), LayerContext{}, &cache);
  return attended + mlp->forward(detail::norm_in_fp32(ln_2, attended));
}

Gpt2Model::Gpt2Model(const io::Gpt2Config& s) {
  // Note [Deferred materialization]: each part's memory released once built, inside a DeferredParameters scope.
  wte = register_module("wte", torch::nn::Embedding(s.vocab_size, s.n_embd));
  defer_parameters(*wte);
  wpe = register_module("wpe", torch::nn::Embedding(s.n_positions, s.n_embd));
  defer_parameters(*wpe);
  torch::nn::ModuleList blocks;
  for (int64_t i = 0; i < s.n_layer; ++i) {
    h.push_back(std::make_shared<Gpt2Block>(s));
    defer_parameters(*h.back());
    blocks->push_back(h.back());
  }
  register_module("h", blocks);
  ln_f = register_module("ln_f", make_layer_norm(s));
  defer_parameters(*ln_f);
}

GPT2LMHeadModel::GPT2LMHeadModel(io::HfConfig config)
    : CausalLM("GPT2LMHeadModel", std::move(config)),
      settings_(this->config().gpt2()),
      spec_(detail::causal_lm_spec("gpt2", "GPT2LMHeadModel", "transformer", settings_.tie_word_embeddings,
                                   {".attn.bias", ".attn.masked_bias"})) {  // causal-mask buffers of old exports
  transformer = register_module("transformer", std::make_shared<Gpt2Model>(settings_));
  if (!settings_.tie_word_embeddings) {
    lm_head = register_module(
        "lm_head", LoraLinear(torch::nn::LinearOptions(settings_.n_embd, settings_.vocab_size).bias(false)));
    defer_parameters(*lm_head);
  }
  init_weights();
}

void GPT2LMHeadModel::init_weights() {
  detail::init_like_transformers(*this, settings_.initializer_range);  // embeddings, LayerNorms, lm_head
  at::NoGradGuard no_grad;
  // transformers scales the residual projections ("c_proj.weight") by 1/sqrt(2 n_layer) (GPT-2 paper, 2.3).
  const double weight_std = settings_.initializer_range;
  const double proj_std = weight_std / std::sqrt(2.0 * static_cast<double>(settings_.n_layer));
  auto init = [](Gpt2Conv1D& conv, double conv_std) {  // Note [Deferred materialization]: what initializes() allows
    if (initializes(conv.weight)) conv.weight.normal_(0.0, conv_std);
    if (initializes(conv.bias)) conv.bias.zero_();
  };
  for (const auto& block : transformer->h) {
    init(*block->attn->c_attn, weight_std);
    init(*block->attn->c_proj, proj_std);
    init(*block->mlp->c_fc, weight_std);
    init(*block->mlp->c_proj, proj_std);
  }
}

at::Tensor GPT2LMHeadModel::hidden_states(const ModelInputs& inputs) {
  detail::check_causal_inputs(inputs, "GPT-2");
  at::Tensor hidden = run_unit(UnitKind::embeddings, inputs.input_ids,
                               [&](const at::Tensor& ids) { return embed(ids, 0, inputs.position_ids); });
  const LayerContext context = LayerContext::of(inputs);
  for (const auto& block : transformer->h) hidden = run_layer(*block, hidden, context);
  return detail::norm_in_fp32(transformer->ln_f, hidden);
}

LmHead GPT2LMHeadModel::head() { return detail::lm_head(lm_head, transformer->wte, is_training()); }

at::Tensor GPT2LMHeadModel::forward_cached(const at::Tensor& input_ids, KvCache& cache) {
  detail::check_cached_inputs(input_ids, cache, transformer->h.size(), "GPT-2");
  at::Tensor hidden = embed(input_ids, cache.length());
  for (size_t i = 0; i < transformer->h.size(); ++i) hidden = transformer->h[i]->forward_cached(hidden, cache.layer(i));
  return head().logits(detail::norm_in_fp32(transformer->ln_f, hidden));
}

at::Tensor GPT2LMHeadModel::embed(const at::Tensor& input_ids, int64_t first_position, const at::Tensor& position_ids) {
  const int64_t end = first_position + input_ids.size(1);
  HPCTRAIN_CHECK(end <= settings_.n_positions,
                 "GPT-2: sequence length {} exceeds n_positions {}; truncate the input (or generate fewer tokens)", end,
                 settings_.n_positions);
  // Given positions (rows packed from documents restart at 0 in each) never exceed the row's length.
  const at::Tensor positions =
      position_ids.defined() ? position_ids : at::arange(first_position, end, input_ids.options()).unsqueeze(0);
  const at::Tensor hidden = embedding_lookup(transformer->wte, input_ids) + transformer->wpe->forward(positions);
  return detail::seeded_dropout(hidden, settings_.embd_pdrop, is_training());
}

const ModelSpec& GPT2LMHeadModel::spec() const { return spec_; }

torch::nn::EmbeddingImpl* GPT2LMHeadModel::input_embeddings() { return transformer->wte.get(); }

std::vector<torch::nn::Module*> GPT2LMHeadModel::unit_modules(UnitKind kind) {
  if (kind == UnitKind::embeddings) return {transformer->wte.get(), transformer->wpe.get()};
  return {lm_head.is_empty() ? static_cast<torch::nn::Module*>(transformer->wte.get()) : lm_head.get()};  // Note [Tied head]
}

std::vector<TransformerLayer*> GPT2LMHeadModel::transformer_layers() {
  std::vector<TransformerLayer*> out;
  for (const auto& block : transformer->h) out.push_back(block.get());
  return out;
}

}  // namespace hpctrain::models
