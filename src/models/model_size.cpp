// Parameter counts per architecture from the config (Note [Size before building], model_size.hpp).
#include "hpctrain/models/model_size.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "hpctrain/core/error.hpp"
#include "hpctrain/core/memory_info.hpp"

namespace hpctrain::models {
namespace {

constexpr int64_t kFp32Bytes = 4;

int64_t checked_mul(int64_t a, int64_t b, const std::string& fields) {
  int64_t out = 0;
  HPCTRAIN_CHECK(!__builtin_mul_overflow(a, b, &out), "{} overflows int64 ({} x {}): the model cannot exist", fields, a,
                 b);
  return out;
}

int64_t checked_add(int64_t a, int64_t b, const std::string& fields) {
  int64_t out = 0;
  HPCTRAIN_CHECK(!__builtin_add_overflow(a, b, &out), "the parameter count overflows int64 at {}", fields);
  return out;
}

void require_positive(int64_t value, const char* field) {
  HPCTRAIN_CHECK(value > 0, "{} = {}: expected a positive size", field, value);
}

// Accumulates the terms of one model.
class Counter {
 public:
  // in x out weights plus out biases (a Linear layer, unless !bias), times `repeat`.
  void linear(int64_t in, int64_t out, const std::string& fields, int64_t repeat = 1, bool bias = true) {
    add(checked_mul(checked_add(checked_mul(in, out, fields), bias ? out : 0, fields), repeat, fields), fields);
  }
  void add(int64_t parameters, const std::string& fields) {
    size_.parameters = checked_add(size_.parameters, parameters, fields);
    size_.terms.push_back({fields, parameters});
  }
  ModelSize done() {
    std::stable_sort(size_.terms.begin(), size_.terms.end(),
                     [](const SizeTerm& a, const SizeTerm& b) { return a.parameters > b.parameters; });
    return size_;
  }

 private:
  ModelSize size_;
};

std::string times(const char* a, int64_t x, const char* b, int64_t y) {
  return fmt::format("{} {} x {} {}", a, x, b, y);
}

ModelSize distilbert_size(const io::DistilBertConfig& s, int64_t labels) {
  for (auto [value, field] : {std::pair{s.vocab_size, "vocab_size"},
                              {s.dim, "dim"},
                              {s.hidden_dim, "hidden_dim"},
                              {s.max_position_embeddings, "max_position_embeddings"},
                              {s.n_layers, "n_layers"}})
    require_positive(value, field);
  Counter c;
  c.add(checked_mul(s.vocab_size, s.dim, "vocab_size x dim"), times("vocab_size", s.vocab_size, "dim", s.dim));
  c.add(checked_mul(s.max_position_embeddings, s.dim, "max_position_embeddings x dim"),
        times("max_position_embeddings", s.max_position_embeddings, "dim", s.dim));
  c.add(checked_mul(2, s.dim, "dim"), "embeddings LayerNorm (dim)");
  const std::string layers = fmt::format("n_layers {} x ", s.n_layers);
  c.linear(s.dim, s.dim, layers + fmt::format("4 attention projections (dim {} x dim)", s.dim),
           checked_mul(4, s.n_layers, "n_layers"));
  c.linear(s.dim, s.hidden_dim, layers + times("dim", s.dim, "hidden_dim", s.hidden_dim) + " (lin1)", s.n_layers);
  c.linear(s.hidden_dim, s.dim, layers + times("hidden_dim", s.hidden_dim, "dim", s.dim) + " (lin2)", s.n_layers);
  c.add(checked_mul(checked_mul(4, s.dim, "dim"), s.n_layers, layers + "LayerNorms"), layers + "2 LayerNorms (dim)");
  c.linear(s.dim, s.dim, fmt::format("pre_classifier (dim {} x dim)", s.dim));
  c.linear(s.dim, labels, times("dim", s.dim, "num_labels", labels) + " (classifier)");
  return c.done();
}

ModelSize bert_size(const io::BertConfig& s, int64_t labels) {
  for (auto [value, field] : {std::pair{s.vocab_size, "vocab_size"},
                              {s.hidden_size, "hidden_size"},
                              {s.intermediate_size, "intermediate_size"},
                              {s.max_position_embeddings, "max_position_embeddings"},
                              {s.type_vocab_size, "type_vocab_size"},
                              {s.num_hidden_layers, "num_hidden_layers"}})
    require_positive(value, field);
  const int64_t h = s.hidden_size;
  Counter c;
  c.add(checked_mul(s.vocab_size, h, "vocab_size x hidden_size"), times("vocab_size", s.vocab_size, "hidden_size", h));
  c.add(checked_mul(s.max_position_embeddings, h, "max_position_embeddings x hidden_size"),
        times("max_position_embeddings", s.max_position_embeddings, "hidden_size", h));
  c.add(checked_mul(s.type_vocab_size, h, "type_vocab_size x hidden_size"),
        times("type_vocab_size", s.type_vocab_size, "hidden_size", h));
  c.add(checked_mul(2, h, "hidden_size"), "embeddings LayerNorm (hidden_size)");
  const std::string layers = fmt::format("num_hidden_layers {} x ", s.num_hidden_layers);
  c.linear(h, h, layers + fmt::format("4 attention projections (hidden_size {} x hidden_size)", h),
           checked_mul(4, s.num_hidden_layers, "num_hidden_layers"));
  c.linear(h, s.intermediate_size, layers + times("hidden_size", h, "intermediate_size", s.intermediate_size),
           s.num_hidden_layers);
  c.linear(s.intermediate_size, h, layers + times("intermediate_size", s.intermediate_size, "hidden_size", h),
           s.num_hidden_layers);
  c.add(checked_mul(checked_mul(4, h, "hidden_size"), s.num_hidden_layers, layers + "LayerNorms"),
        layers + "2 LayerNorms (hidden_size)");
  c.linear(h, h, fmt::format("pooler (hidden_size {} x hidden_size)", h));
  c.linear(h, labels, times("hidden_size", h, "num_labels", labels) + " (classifier)");
  return c.done();
}

ModelSize gpt2_size(const io::Gpt2Config& s) {
  for (auto [value, field] : {std::pair{s.vocab_size, "vocab_size"},
                              {s.n_embd, "n_embd"},
                              {s.inner_size(), "n_inner"},
                              {s.n_positions, "n_positions"},
                              {s.n_layer, "n_layer"}})
    require_positive(value, field);
  const int64_t d = s.n_embd, inner = s.inner_size();
  Counter c;
  c.add(checked_mul(s.vocab_size, d, "vocab_size x n_embd"), times("vocab_size", s.vocab_size, "n_embd", d) + " (wte)");
  c.add(checked_mul(s.n_positions, d, "n_positions x n_embd"), times("n_positions", s.n_positions, "n_embd", d));
  const std::string layers = fmt::format("n_layer {} x ", s.n_layer);
  c.linear(d, checked_mul(3, d, "n_embd"), layers + fmt::format("c_attn (n_embd {} x 3 n_embd)", d), s.n_layer);
  c.linear(d, d, layers + fmt::format("attn.c_proj (n_embd {} x n_embd)", d), s.n_layer);
  c.linear(d, inner, layers + times("n_embd", d, "n_inner", inner) + " (c_fc)", s.n_layer);
  c.linear(inner, d, layers + times("n_inner", inner, "n_embd", d) + " (mlp.c_proj)", s.n_layer);
  c.add(checked_mul(checked_mul(4, d, "n_embd"), s.n_layer, layers + "LayerNorms"), layers + "2 LayerNorms (n_embd)");
  c.add(checked_mul(2, d, "n_embd"), "ln_f (n_embd)");
  if (!s.tie_word_embeddings)
    c.linear(d, s.vocab_size, times("n_embd", d, "vocab_size", s.vocab_size) + " (lm_head)", 1, false);
  return c.done();
}

// Llama and Qwen2 (Qwen2: q/k/v bias, never o_proj or MLP bias).
ModelSize llama_size(const io::LlamaConfig& s, bool qwen2) {
  for (auto [value, field] : {std::pair{s.vocab_size, "vocab_size"},
                              {s.hidden_size, "hidden_size"},
                              {s.intermediate_size, "intermediate_size"},
                              {s.num_hidden_layers, "num_hidden_layers"},
                              {s.num_attention_heads, "num_attention_heads"},
                              {s.kv_heads(), "num_key_value_heads"},
                              {s.head_size(), "head_dim"}})
    require_positive(value, field);
  const int64_t d = s.hidden_size, n = s.num_hidden_layers;
  const int64_t q_width = checked_mul(s.num_attention_heads, s.head_size(), "num_attention_heads x head_dim");
  const int64_t kv_width = checked_mul(s.kv_heads(), s.head_size(), "num_key_value_heads x head_dim");
  const bool mlp_bias = !qwen2 && s.mlp_bias;
  Counter c;
  c.add(checked_mul(s.vocab_size, d, "vocab_size x hidden_size"), times("vocab_size", s.vocab_size, "hidden_size", d));
  const std::string layers = fmt::format("num_hidden_layers {} x ", n);
  c.linear(d, q_width, layers + times("hidden_size", d, "heads x head_dim", q_width) + " (q_proj)", n,
           s.attention_bias);
  c.linear(d, kv_width, layers + times("hidden_size", d, "kv heads x head_dim", kv_width) + " (k_proj, v_proj)",
           checked_mul(2, n, "num_hidden_layers"), s.attention_bias);
  c.linear(q_width, d, layers + times("heads x head_dim", q_width, "hidden_size", d) + " (o_proj)", n,
           !qwen2 && s.attention_bias);
  c.linear(d, s.intermediate_size,
           layers + times("hidden_size", d, "intermediate_size", s.intermediate_size) + " (gate_proj, up_proj)",
           checked_mul(2, n, "num_hidden_layers"), mlp_bias);
  c.linear(s.intermediate_size, d,
           layers + times("intermediate_size", s.intermediate_size, "hidden_size", d) + " (down_proj)", n, mlp_bias);
  c.add(checked_mul(checked_add(checked_mul(2, n, "num_hidden_layers"), 1, "norms"), d, "RMSNorms"),
        "RMSNorms (hidden_size)");
  if (!s.tie_word_embeddings)
    c.linear(d, s.vocab_size, times("hidden_size", d, "vocab_size", s.vocab_size) + " (lm_head)", 1, false);
  return c.done();
}

// The classifier head shared by the CNN and the MLP: hidden Linear layers then the classifier.
void head_size(Counter& c, int64_t width, const std::vector<int64_t>& hidden, int64_t labels,
               const std::string& input) {
  std::string in = input;
  for (const int64_t out : hidden) {
    require_positive(out, "hidden[]");
    c.linear(width, out, fmt::format("{} {} x hidden {}", in, width, out));
    width = out, in = "hidden";
  }
  c.linear(width, labels, fmt::format("{} {} x num_labels {}", in, width, labels));
}

ModelSize vision_size(int64_t channels, int64_t side, const std::vector<int64_t>* conv,
                      const std::vector<int64_t>& hidden, int64_t labels) {
  require_positive(channels, "in_channels");
  require_positive(side, "image_size");
  Counter c;
  const std::string pixels = fmt::format("in_channels {} x image_size {}^2", channels, side);
  int64_t width = checked_mul(checked_mul(channels, side, pixels), side, pixels);
  if (conv != nullptr) {
    for (const int64_t out : *conv) {
      require_positive(out, "conv_channels[]");
      c.linear(checked_mul(channels, 9, "conv_channels"), out, fmt::format("conv {} x 3 x 3 -> {}", channels, out));
      channels = out, side /= 2;
    }
    width = checked_mul(checked_mul(channels, side, "conv output"), side, "conv output");
  }
  head_size(c, width, hidden, labels, conv != nullptr ? "conv output" : pixels);
  return c.done();
}

}  // namespace

int64_t ModelSize::bytes(int64_t bytes_per_parameter) const {
  int64_t out = 0;
  HPCTRAIN_CHECK(!__builtin_mul_overflow(parameters, bytes_per_parameter, &out),
                 "the parameter bytes overflow int64 ({} parameters x {} bytes){}: the model cannot exist", parameters,
                 bytes_per_parameter, largest_term());
  return out;
}

std::string ModelSize::largest_term() const {
  return terms.empty() ? "" : fmt::format("; largest: {} = {} parameters", terms.front().fields, terms.front().parameters);
}

ModelSize estimate_model_size(const io::HfConfig& config) {
  const int64_t labels = config.common.num_labels();
  if (const auto* d = std::get_if<io::DistilBertConfig>(&config.model)) return distilbert_size(*d, labels);
  if (const auto* b = std::get_if<io::BertConfig>(&config.model)) return bert_size(*b, labels);
  if (const auto* cnn = std::get_if<io::CnnConfig>(&config.model))
    return vision_size(cnn->in_channels, cnn->image_size, &cnn->conv_channels, cnn->hidden, labels);
  if (const auto* mlp = std::get_if<io::MlpConfig>(&config.model))
    return vision_size(mlp->in_channels, mlp->image_size, nullptr, mlp->hidden, labels);
  if (const auto* g = std::get_if<io::Gpt2Config>(&config.model)) return gpt2_size(*g);
  if (const auto* l = std::get_if<io::LlamaConfig>(&config.model)) return llama_size(*l, false);
  if (const auto* q = std::get_if<io::Qwen2Config>(&config.model)) return llama_size(*q, true);
  return ModelSize{};  // not a model hpctrain builds: from_config refuses it by model_type
}

void check_model_fits(const ModelSize& size, int64_t copies, int64_t available_bytes,
                      const std::string& available_source, const std::string& source, const std::string& purpose,
                      int64_t extra_bytes) {
  int64_t copy_bytes = 0;
  try {
    copy_bytes = checked_mul(size.bytes(kFp32Bytes), copies, "the memory of the parameter copies" + size.largest_term());
  } catch (const Error& error) {
    fail("{}: {}", source, error.what());
  }
  HPCTRAIN_CHECK(extra_bytes <= std::numeric_limits<int64_t>::max() - copy_bytes,
                 "{}: the memory {} needs overflows int64{}", source, purpose, size.largest_term());
  const int64_t needed = copy_bytes + extra_bytes;
  if (needed <= available_bytes) return;
  const std::string largest = size.largest_term();
  const std::string extra = extra_bytes > 0 ? fmt::format(" + {} of optimizer state", core::format_bytes(extra_bytes)) : "";
  // copies 0: the weights exist only as shards (--zero-stage 3 built unit by unit), counted in extra_bytes.
  const std::string parts = copies == 0 ? fmt::format("{} of shards", core::format_bytes(extra_bytes))
                                        : fmt::format("{} fp32 cop{}{}", copies, copies == 1 ? "y" : "ies", extra);
  fail("{}: the model has {} parameters{}: {} needs {} ({}) but {} are available ({})\n  hint: check "
       "the sizes in the config (dim, hidden_size, n_layers, vocab_size, ...)",
       source, size.parameters, largest, purpose, core::format_bytes(needed), parts,
       core::format_bytes(available_bytes), available_source);
}

void check_model_fits_host(const io::HfConfig& config, int64_t copies, const std::string& source,
                           const std::string& purpose, const ExtraBytes& extra_bytes) {
  ModelSize size;
  try {
    size = estimate_model_size(config);
  } catch (const Error& error) {
    fail("{}: {}", source, error.what());
  }
  const auto available = core::available_host_memory();
  if (!available) return;
  // An optimizer holds at most two fp32 values per parameter: below this bound its state's bytes cannot overflow;
  // above it the fp32 copies alone are more than half of int64, and check_model_fits refuses the model without
  // asking (UBSan found the overflow of 2 x 4 bytes x 5e18 parameters in the state's count).
  const bool state_representable = size.parameters <= std::numeric_limits<int64_t>::max() / 16;
  const int64_t extra = extra_bytes && state_representable ? extra_bytes(size.parameters) : 0;
  check_model_fits(size, copies, available->bytes, available->source, source, purpose, extra);
}

}  // namespace hpctrain::models
