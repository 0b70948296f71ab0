// LlamaForCausalLM and Qwen2ForCausalLM as transformers' modeling_llama.py / modeling_qwen2.py: same modules
// and parameter names (model.embed_tokens, model.layers.N.self_attn.{q,k,v,o}_proj,
// ...mlp.{gate,up,down}_proj, ...input_layernorm, ...post_attention_layernorm, model.norm; lm_head unless
// tied, Note [Tied head]), same numerics (RMSNorm in float32, rotary embeddings on q and k with rope_type
// default, linear or llama3, SwiGLU MLP, grouped-query attention, scores scaled by head_dim^-0.5).
// Qwen2 is the same network with a bias on q, k and v (io::Qwen2Config).
// Not here: sliding-window attention, dynamic/yarn/longrope rotary scaling, pretraining_tp slicing (the same
// function), the decoding loop (generation.hpp).
#pragma once

#include "hpctrain/models/lora.hpp"

#include "hpctrain/models/causal_lm.hpp"

#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>

#include <cstdint>
#include <memory>
#include <vector>

namespace hpctrain::models {

// Rotary position embeddings: the inverse frequencies of transformers' ROPE_INIT_FUNCTIONS for the rope_type
// (not a parameter or buffer: transformers' inv_freq is non-persistent).
class RotaryEmbedding {
 public:
  RotaryEmbedding(const io::RopeConfig& rope, int64_t head_dim);
  // x [B, L, heads, head_dim] at positions first_position ... + L - 1 -> rotated x (transformers'
  // apply_rotary_pos_emb; first_position > 0 for tokens after a KV cache's, Note [KV cache]).
  [[nodiscard]] at::Tensor rotate(const at::Tensor& x, int64_t first_position = 0) const;
  // The same at per-token positions int64 [B, L] (rows packed from documents restart at 0 in each, Note [Document
  // boundaries] in src/data/examples.cpp), as transformers given position_ids; undefined: 0 ... L - 1.
  [[nodiscard]] at::Tensor rotate(const at::Tensor& x, const at::Tensor& positions) const;
  [[nodiscard]] const at::Tensor& inverse_frequencies() const { return inv_freq_; }  // float32 [head_dim / 2]

 private:
  at::Tensor inv_freq_;
};

// transformers' LlamaRMSNorm: weight * (x / sqrt(mean(x^2) + eps)), the statistics in float32.
class LlamaRMSNorm : public torch::nn::Module {
 public:
  LlamaRMSNorm(int64_t size, double eps);
  at::Tensor forward(const at::Tensor& x);

  at::Tensor weight;

 private:
  double eps_;
};

class LlamaAttention : public torch::nn::Module {
 public:
  LlamaAttention(const io::LlamaConfig& config, bool qkv_bias, bool o_bias,
                 std::shared_ptr<const RotaryEmbedding> rotary);
  // cache: this layer's keys and values, appended to and attended to (Note [KV cache]); null in training.
  at::Tensor forward(const at::Tensor& hidden, const LayerContext& context, LayerKvCache* cache = nullptr);

  LoraLinear q_proj{nullptr}, k_proj{nullptr}, v_proj{nullptr}, o_proj{nullptr};

 private:
  int64_t heads_, kv_heads_, head_dim_;
  double dropout_;
  std::shared_ptr<const RotaryEmbedding> rotary_;
};

class LlamaMlp : public torch::nn::Module {  // down(act(gate(x)) * up(x))
 public:
  LlamaMlp(const io::LlamaConfig& config, bool bias);
  at::Tensor forward(const at::Tensor& hidden);

  LoraLinear gate_proj{nullptr}, up_proj{nullptr}, down_proj{nullptr};

 private:
  io::Activation activation_;
};

class LlamaDecoderLayer : public TransformerLayer {
 public:
  LlamaDecoderLayer(const io::LlamaConfig& config, bool qwen2, std::shared_ptr<const RotaryEmbedding> rotary);
  at::Tensor forward(const at::Tensor& hidden, const LayerContext& context) override;
  at::Tensor forward_cached(const at::Tensor& hidden, LayerKvCache& cache);  // Note [KV cache]

  std::shared_ptr<LlamaAttention> self_attn;
  std::shared_ptr<LlamaMlp> mlp;
  std::shared_ptr<LlamaRMSNorm> input_layernorm, post_attention_layernorm;
};

// LlamaModel: embed_tokens, layers.N, norm (the LM runs the layers, so that a LayerRunner can wrap each one).
class LlamaModel : public torch::nn::Module {
 public:
  LlamaModel(const io::LlamaConfig& config, bool qwen2);

  torch::nn::Embedding embed_tokens{nullptr};
  std::vector<std::shared_ptr<LlamaDecoderLayer>> layers;  // registered as layers.N
  std::shared_ptr<LlamaRMSNorm> norm;
  std::shared_ptr<const RotaryEmbedding> rotary;  // shared by the layers
};

// model_type "llama" (LlamaForCausalLM) or "qwen2" (Qwen2ForCausalLM).
class LlamaForCausalLM : public CausalLM {
 public:
  // Builds the modules from config.llama_family() and initializes them with init_weights().
  explicit LlamaForCausalLM(io::HfConfig config);

  [[nodiscard]] at::Tensor hidden_states(const ModelInputs& inputs) override;
  [[nodiscard]] LmHead head() override;
  [[nodiscard]] at::Tensor forward_cached(const at::Tensor& input_ids, KvCache& cache) override;
  [[nodiscard]] const ModelSpec& spec() const override;
  // transformers' _init_weights: Linear and Embedding normal(0, initializer_range) (the padding row zero),
  // biases zero, RMSNorm weights 1.
  void init_weights() override;
  [[nodiscard]] std::vector<TransformerLayer*> transformer_layers() override;
  [[nodiscard]] torch::nn::EmbeddingImpl* input_embeddings() override;
  [[nodiscard]] std::vector<torch::nn::Module*> unit_modules(UnitKind kind) override;
  [[nodiscard]] int64_t vocab_size() const override { return settings_.vocab_size; }
  [[nodiscard]] bool tied_head() const override { return settings_.tie_word_embeddings; }

  std::shared_ptr<LlamaModel> model;
  LoraLinear lm_head{nullptr};  // null when tied (Note [Tied head]); LoRA may target it (Note [LM head])

 private:
  io::LlamaConfig settings_;  // a copy of config().llama_family()
  ModelSpec spec_;
};

}  // namespace hpctrain::models
