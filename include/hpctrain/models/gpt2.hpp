// GPT2LMHeadModel as transformers' modeling_gpt2.py: same modules and parameter names
// (transformer.wte, transformer.wpe, transformer.h.N.ln_1, ...attn.c_attn, ...attn.c_proj, ...mlp.c_fc,
// ...mlp.c_proj, transformer.ln_f; lm_head only when untied, Note [Tied head]), same numerics (learned
// absolute positions 0..L-1, pre-LayerNorm blocks, gelu_new, scores scaled by 1/sqrt(head_dim), causal and
// padding masks with the dtype's lowest value).
// Not here: cross-attention, scale_attn_by_inverse_layer_idx, the double-heads and classification variants.
//
// Note [Conv1D weights]
// GPT-2's projections are transformers' Conv1D: a Linear whose weight is stored transposed, [in, out], and
// applied as x @ W + b. hpctrain keeps that layout in the parameter itself (Gpt2Conv1D::weight is [in, out]),
// so the checkpoint's tensors load and save as they are, with their HF shapes, and no transposition is ever
// done on a load or a save path. Anything that builds one from a Linear (or compares with one) transposes.
#pragma once

#include "hpctrain/models/causal_lm.hpp"
#include "hpctrain/models/lora.hpp"

#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>

#include <cstdint>
#include <memory>
#include <vector>

namespace hpctrain::models {

// transformers' Conv1D (Note [Conv1D weights]): weight [in_features, out_features], bias [out_features].
// It can carry a LoRA adapter (Note [LoRA]: PEFT's fan_in_fan_out layer).
class Gpt2Conv1D : public torch::nn::Module, public LoraTarget {
 public:
  Gpt2Conv1D(int64_t in_features, int64_t out_features);
  at::Tensor forward(const at::Tensor& x);  // [..., in] -> [..., out]
  [[nodiscard]] at::Tensor& base_weight() override { return weight; }
  [[nodiscard]] bool fan_in_fan_out() const override { return true; }
  [[nodiscard]] torch::nn::Module& as_module() override { return *this; }

  at::Tensor weight, bias;

 protected:
  [[nodiscard]] int64_t stored_in_features() const override { return weight.size(0); }
  [[nodiscard]] int64_t stored_out_features() const override { return weight.size(1); }
};

class Gpt2Attention : public torch::nn::Module {
 public:
  explicit Gpt2Attention(const io::Gpt2Config& config);
  // cache: this layer's keys and values, appended to and attended to (Note [KV cache]); null in training.
  at::Tensor forward(const at::Tensor& hidden, const LayerContext& context, LayerKvCache* cache = nullptr);

  std::shared_ptr<Gpt2Conv1D> c_attn;  // [D, 3D]: q, k, v side by side
  std::shared_ptr<Gpt2Conv1D> c_proj;

 private:
  int64_t heads_;
  double scale_, attn_dropout_, resid_dropout_;
};

class Gpt2Mlp : public torch::nn::Module {
 public:
  explicit Gpt2Mlp(const io::Gpt2Config& config);
  at::Tensor forward(const at::Tensor& hidden);

  std::shared_ptr<Gpt2Conv1D> c_fc, c_proj;

 private:
  io::Activation activation_;
  double dropout_;
};

class Gpt2Block : public TransformerLayer {
 public:
  explicit Gpt2Block(const io::Gpt2Config& config);
  at::Tensor forward(const at::Tensor& hidden, const LayerContext& context) override;
  at::Tensor forward_cached(const at::Tensor& hidden, LayerKvCache& cache);  // Note [KV cache]

  torch::nn::LayerNorm ln_1{nullptr}, ln_2{nullptr};
  std::shared_ptr<Gpt2Attention> attn;
  std::shared_ptr<Gpt2Mlp> mlp;
};

// GPT2Model: wte, wpe, h.N, ln_f (the LM head model runs the blocks, so that a LayerRunner can wrap each one).
class Gpt2Model : public torch::nn::Module {
 public:
  explicit Gpt2Model(const io::Gpt2Config& config);

  torch::nn::Embedding wte{nullptr}, wpe{nullptr};
  std::vector<std::shared_ptr<Gpt2Block>> h;  // registered as h.N
  torch::nn::LayerNorm ln_f{nullptr};
};

class GPT2LMHeadModel : public CausalLM {
 public:
  // Builds the modules from config.gpt2() and initializes them with init_weights().
  explicit GPT2LMHeadModel(io::HfConfig config);

  [[nodiscard]] at::Tensor hidden_states(const ModelInputs& inputs) override;
  [[nodiscard]] LmHead head() override;
  [[nodiscard]] at::Tensor forward_cached(const at::Tensor& input_ids, KvCache& cache) override;
  [[nodiscard]] const ModelSpec& spec() const override;
  // transformers' GPT2 _init_weights: normal(0, initializer_range), c_proj weights normal(0, initializer_range
  // / sqrt(2 n_layer)), zero biases, LayerNorm 1 and 0.
  void init_weights() override;
  [[nodiscard]] std::vector<TransformerLayer*> transformer_layers() override;
  [[nodiscard]] torch::nn::EmbeddingImpl* input_embeddings() override;
  [[nodiscard]] std::vector<torch::nn::Module*> unit_modules(UnitKind kind) override;
  [[nodiscard]] int64_t vocab_size() const override { return settings_.vocab_size; }
  [[nodiscard]] bool tied_head() const override { return settings_.tie_word_embeddings; }

  std::shared_ptr<Gpt2Model> transformer;
  LoraLinear lm_head{nullptr};  // null when tied (Note [Tied head]); LoRA may target it (Note [LM head])

 private:
  // Token + position embeddings of input_ids at positions first_position ..., or at position_ids [B, L] when
  // defined (+ dropout when training).
  at::Tensor embed(const at::Tensor& input_ids, int64_t first_position, const at::Tensor& position_ids = at::Tensor());

  io::Gpt2Config settings_;  // a copy of config().gpt2()
  ModelSpec spec_;
};

}  // namespace hpctrain::models
