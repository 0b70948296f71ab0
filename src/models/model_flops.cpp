// training_flops_per_token (model_flops.hpp, Note [Model FLOPs]).
#include "hpctrain/models/model_flops.hpp"

namespace hpctrain::models {
namespace {

struct Shape {
  double layers = 0, matmul_parameters = 0, attention_width = 0;
};

double flops(const Shape& s, double context) {
  return 6.0 * s.matmul_parameters + 12.0 * s.layers * s.attention_width * context;
}

}  // namespace

std::optional<double> training_flops_per_token(const io::HfConfig& config, double context) {
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
  return flops(s, context);
}

}  // namespace hpctrain::models
