// training_flops_per_token (model_flops.hpp, Note [Model FLOPs]).
#include "hpctrain/models/model_flops.hpp"

#include <ATen/core/Tensor.h>

#include <algorithm>
#include <string>

namespace hpctrain::models {
namespace {

struct Shape {
  double layers = 0, matmul_parameters = 0, attention_width = 0;
};

double flops(const Shape& s, double context, const WeightGradients& g) {
  const double trainable = std::min(g.trainable_in_base.value_or(s.matmul_parameters), s.matmul_parameters);
  const double frozen = s.matmul_parameters - trainable;
  return 6.0 * trainable + 4.0 * frozen + 6.0 * g.outside_base + 12.0 * s.layers * s.attention_width * context;
}

}  // namespace

std::optional<double> training_flops_per_token(const io::HfConfig& config, double context, const WeightGradients& gradients) {
  const std::string& type = config.model_type();
  Shape s;
  if (type == "distilbert" || type == "bert") {
    const bool distil = type == "distilbert";
    const auto d = static_cast<double>(distil ? config.distilbert().dim : config.bert().hidden_size);
    const auto f = static_cast<double>(distil ? config.distilbert().hidden_dim : config.bert().intermediate_size);
    s.layers = static_cast<double>(distil ? config.distilbert().n_layers : config.bert().num_hidden_layers);
    s.matmul_parameters = s.layers * (4 * d * d + 2 * d * f) + d * d;  // + pre_classifier / pooler
    s.attention_width = d;
  } else if (type == "gpt2") {
    const io::Gpt2Config& c = config.gpt2();
    const auto d = static_cast<double>(c.n_embd), f = static_cast<double>(c.inner_size());
    s.layers = static_cast<double>(c.n_layer);
    s.matmul_parameters = s.layers * (4 * d * d + 2 * d * f) + static_cast<double>(c.vocab_size) * d;
    s.attention_width = d;
  } else if (type == "llama" || type == "qwen2") {
    const io::LlamaConfig& c = config.llama_family();
    const auto d = static_cast<double>(c.hidden_size), f = static_cast<double>(c.intermediate_size);
    const auto q = static_cast<double>(c.num_attention_heads * c.head_size());
    const auto kv = static_cast<double>(c.kv_heads() * c.head_size());
    s.layers = static_cast<double>(c.num_hidden_layers);
    s.matmul_parameters = s.layers * (2 * d * q + 2 * d * kv + 3 * d * f) + static_cast<double>(c.vocab_size) * d;
    s.attention_width = q;
  } else {
    return std::nullopt;
  }
  return flops(s, context, gradients);
}

WeightGradients weight_gradients(const Model& model) {
  WeightGradients out;
  double in_base = 0;
  bool all_train = true;
  for (const auto& item : model.named_parameters()) {
    const at::Tensor& p = item.value();
    all_train = all_train && p.requires_grad();
    if (!p.requires_grad() || p.dim() != 2) continue;
    const bool adapter = item.key().find(".lora_A.") != std::string::npos || item.key().find(".lora_B.") != std::string::npos;
    (adapter ? out.outside_base : in_base) += static_cast<double>(p.numel());
  }
  if (!all_train) out.trainable_in_base = in_base;
  return out;
}

}  // namespace hpctrain::models
