// estimate_memory (memory_estimate.hpp): bytes per rank of one training step from the config and shapes.
#include "hpctrain/train/memory_estimate.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "activation_arithmetic.hpp"
#include "lora_memory_estimate.hpp"
#include "zero_memory_estimate.hpp"
#include "hpctrain/core/error.hpp"
#include "hpctrain/models/lora.hpp"
#include "hpctrain/models/registry.hpp"
#include "hpctrain/optim/optimizer.hpp"

namespace hpctrain::train {

namespace detail {

int64_t activation_bytes(const std::string& precision) {
  if (precision == "fp32") return 4;
  if (precision == "bf16") return 2;
  fail("--precision '{}': expected fp32 or bf16", precision);
}

int64_t layer_norm_block_bytes(int64_t tokens, int64_t width, int64_t ffn_width, int64_t a) {
  const int64_t layer_norm_inputs = 2 * tokens * width * 4;  // fp32 under autocast too
  return tokens * (7 * width + 2 * ffn_width) * a + layer_norm_inputs + 4 * tokens * 4 + tokens * a;
}

}  // namespace detail

// Note [Activation arithmetic]
// What autograd keeps for backward, counted from the layers as models/ builds them (distilbert.cpp,
// bert.cpp, attention.cpp), for T = batch x sequence tokens, width D, feed-forward width F:
//   layer input (kept by the q/k/v projections)                               T x D
//   q, k, v split into heads (contiguous copies kept by the blocked attention)  3 T x D
//   attention context (kept by the attention) and merged heads (kept by out_lin) 2 T x D
//   first LayerNorm input, and its output (kept by the first FFN projection)     2 T x D
//   FFN inner pre-activation (kept by GELU) and activation (kept by lin2)        2 T x F
//   second LayerNorm input                                                       T x D
// = T (9 D + 2 F) values, plus LayerNorm mean/rstd (4 T fp32) and the attention bias (T). No [L, L]
// score matrix is kept (Note [Attention memory]) and dropout keeps only its seed (Note [Counter-based
// dropout]). With bf16 autocast the values are bf16 except the LayerNorm inputs, which autocast runs in
// fp32. With gradient checkpointing each layer keeps only its input, and backward recomputes one layer
// at a time. Backward's largest temporaries are the FFN's: gradients of the inner pre-activation and
// activation (2 T x F) and of the layer's output and input (2 T x D), allocated while everything kept is
// still alive (the top layer is differentiated first): the step's activation peak. The decoders (Note
// [Decoder activation arithmetic]) add the logits, whose loss tensors usually dominate.
namespace {

struct TransformerShape {
  int64_t layers = 0, width = 0, ffn_width = 0, max_positions = 0;
};

TransformerShape transformer_shape(const io::HfConfig& config) {
  if (config.model_type() == "distilbert") {
    const io::DistilBertConfig& c = config.distilbert();
    return {c.n_layers, c.dim, c.hidden_dim, c.max_position_embeddings};
  }
  if (config.model_type() == "bert") {
    const io::BertConfig& c = config.bert();
    return {c.num_hidden_layers, c.hidden_size, c.intermediate_size, c.max_position_embeddings};
  }
  fail("estimate-memory: model_type '{}' has no activation arithmetic (distilbert, bert, gpt2, llama and qwen2 have)",
       config.model_type());
}

ActivationEstimate encoder_activations(const io::HfConfig& config, const MemoryEstimateOptions& o) {
  const TransformerShape s = transformer_shape(config);
  HPCTRAIN_CHECK(o.sequence_length <= s.max_positions,
                 "--sequence-length {} exceeds the model's max_position_embeddings {}", o.sequence_length,
                 s.max_positions);
  const int64_t a = detail::activation_bytes(o.precision);
  const int64_t tokens = o.batch_size * o.sequence_length;
  ActivationEstimate e;
  e.layers = s.layers;
  e.per_layer = detail::layer_norm_block_bytes(tokens, s.width, s.ffn_width, a);
  const int64_t layer_input = tokens * s.width * a;
  e.kept = s.layers * (o.gradient_checkpointing ? layer_input : e.per_layer);
  // The embeddings' LayerNorm input (fp32) and the token ids the embedding backward keeps; the head's
  // [B, D] tensors are negligible but counted.
  e.embeddings_and_head = tokens * s.width * 4 + tokens * 8 + 3 * o.batch_size * s.width * a;
  e.backward_transient = 2 * tokens * (s.ffn_width + s.width) * a + (o.gradient_checkpointing ? e.per_layer : 0);
  e.total = e.kept + e.embeddings_and_head + e.backward_transient;
  return e;
}

int64_t shape_numel(const std::vector<int64_t>& shape) {
  int64_t numel = 1;
  for (const int64_t size : shape) numel *= size;
  return numel;
}

// Bounded before any arithmetic (issue 30): the byte counts below multiply batch, length, width and layers.
void check_positive(int64_t value, const char* option, int64_t most = int64_t{1} << 24) {
  HPCTRAIN_CHECK(value > 0 && value <= most, "{} {}: expected a positive number, at most {}", option, value, most);
}

}  // namespace

MemoryEstimate estimate_memory(const io::HfConfig& config, const ParameterShapes& parameters,
                               const MemoryEstimateOptions& options) {
  check_positive(options.batch_size, "--batch-size");
  check_positive(options.sequence_length, "--sequence-length");
  models::check_loss_chunk_tokens(options.loss_chunk_tokens);
  check_positive(options.world_size, "--world-size", int64_t{1} << 20);
  if (options.lora_r != 0) check_positive(options.lora_r, "--lora-r", models::kMostLoraRank);
  MemoryEstimate e;
  e.model_type = config.model_type();
  e.optimizer = optim::canonical_optimizer_name(options.optimizer.optim);
  e.precision = options.precision;
  const std::optional<detail::LoraShapes> lora = detail::lora_shapes(config, options);  // Note [LoRA memory arithmetic]
  const ParameterShapes& trainable = lora ? lora->trainable : parameters;
  for (const auto& [name, shape] : parameters) e.parameter_count += shape_numel(shape);
  for (const auto& [name, shape] : trainable) {
    e.trainable_parameter_count += shape_numel(shape);
    e.optimizer_state += optim::optimizer_state_bytes(options.optimizer, shape);
  }
  e.lora_r = options.lora_r;
  if (lora) e.parameter_count += lora->adapter_parameters;
  e.parameters = 4 * e.parameter_count, e.gradients = 4 * e.trainable_parameter_count;  // fp32
  if (options.quantize) {  // Note [LoRA memory arithmetic]: the 4-bit base
    HPCTRAIN_CHECK(lora.has_value(), "--quantize-base {} needs --lora-r R (> 0)", models::to_string(options.quantize->type));
    e.quantize_base = models::to_string(options.quantize->type);
    e.quantized_parameter_count = lora->quantized_parameters;
    e.parameters += lora->quantized_bytes - 4 * lora->quantized_parameters;
    e.dequantized_weight = lora->largest_quantized * detail::activation_bytes(options.precision);
    e.fused_4bit_products = lora->fused_products;
  }
  e.reducer_buckets = options.gradients_are_bucket_views ? 0 : e.gradients;
  e.zero_stage = options.zero_stage, e.world_size = options.world_size;
  const bool decoder =
      config.is_known_model() && models::model_kind(config.model_type()) == models::ModelKind::causal_lm;
  e.activations = decoder ? detail::decoder_activations(config, options) : encoder_activations(config, options);
  if (options.zero_stage == 3 && options.world_size > 1) {  // Note [ZeRO memory arithmetic]
    const detail::ZeroTerms zero = detail::zero3_terms(config, options, e.activations.total);
    e.parameters = zero.parameters, e.gradients = zero.gradients, e.reducer_buckets = zero.reducer_buckets;
    e.optimizer_state = zero.optimizer_state;
  } else if (const auto zero = detail::zero_terms(trainable, options, e.activations.total)) {
    e.gradients = zero->gradients, e.reducer_buckets = zero->reducer_buckets, e.optimizer_state = zero->optimizer_state;
  }
  e.total = e.parameters + e.gradients + e.reducer_buckets + e.optimizer_state + e.activations.total + e.dequantized_weight;
  return e;
}

nlohmann::json to_json(const MemoryEstimate& e) {
  const ActivationEstimate& a = e.activations;
  nlohmann::json out = {{"model_type", e.model_type},
          {"optimizer", e.optimizer},
          {"precision", e.precision},
          {"parameter_count", e.parameter_count},
          {"bytes",
           {{"parameters", e.parameters},
            {"gradients", e.gradients},
            {"reducer_buckets", e.reducer_buckets},
            {"optimizer_state", e.optimizer_state},
            {"activations", a.total},
            {"total", e.total}}},
          {"activations",
           {{"per_layer", a.per_layer},
            {"layers", a.layers},
            {"kept", a.kept},
            {"embeddings_and_head", a.embeddings_and_head},
            {"logits", a.logits},
            {"backward_transient", a.backward_transient},
            {"embedding_gradients", a.embedding_gradients}}}};
  if (e.zero_stage > 0) out["zero_stage"] = e.zero_stage, out["world_size"] = e.world_size;  // stage 0's JSON as before
  if (e.lora_r > 0) out["lora_r"] = e.lora_r, out["trainable_parameter_count"] = e.trainable_parameter_count;
  if (!e.quantize_base.empty()) {
    out["quantize_base"] = e.quantize_base, out["quantized_parameter_count"] = e.quantized_parameter_count;
    out["bytes"]["dequantized_weight"] = e.dequantized_weight;
    out["fused_4bit_products"] = e.fused_4bit_products;
  }
  return out;
}

std::string format_table(const MemoryEstimate& e) {
  std::string out = fmt::format("{} ({} parameters), optimizer {}, activations {}\n", e.model_type, e.parameter_count,
                                e.optimizer, e.precision);
  auto row = [&](const std::string& part, int64_t bytes) {
    out += fmt::format("  {:<28} {:>16} {:>12.1f} MiB\n", part, bytes, static_cast<double>(bytes) / (1 << 20));
  };
  if (e.lora_r > 0)
    out += fmt::format("  LoRA r {}: {} parameters train ({:.2f} %): gradients and optimizer state for them only\n",
                       e.lora_r, e.trainable_parameter_count,
                       100.0 * static_cast<double>(e.trainable_parameter_count) / static_cast<double>(e.parameter_count));
  out += fmt::format("  {:<28} {:>16} {:>16}\n", "per rank", "bytes", "");
  if (e.zero_stage > 0)
    out += fmt::format("  ZeRO stage {} over {} rank(s): {}\n", e.zero_stage, e.world_size,
                       e.world_size == 1       ? "nothing to shard (stage 0's figures)"
                       : e.zero_stage == 1     ? "optimizer state sharded"
                       : e.zero_stage == 2     ? "optimizer state and gradients sharded"
                                               : "optimizer state, gradients and parameters sharded");
  const bool sharded = e.zero_stage > 0 && e.world_size > 1;
  if (!e.quantize_base.empty())
    out += fmt::format("  --quantize-base {}: {} frozen weights in 4-bit form, counted in parameters at their bytes; "
                       "products {}\n", e.quantize_base, e.quantized_parameter_count,
                       e.fused_4bit_products ? "fused (no layer's weight dequantized whole)" : "over each weight dequantized");
  row(sharded && e.zero_stage == 3 ? "parameters (shards, gathered)" : "parameters", e.parameters);
  row(sharded && e.zero_stage >= 2 ? "gradients (rank's slices)" : "gradients", e.gradients);
  row(!sharded ? "reducer buckets (extra)" : e.zero_stage == 1 ? "reduced slices (extra)" : "buckets in flight (extra)",
      e.reducer_buckets);
  row(sharded ? "optimizer state (share)" : "optimizer state", e.optimizer_state);
  row(fmt::format("activations ({} layers)", e.activations.layers), e.activations.total);
  row("  per layer", e.activations.per_layer);
  if (e.activations.logits > 0) row("  logits and loss", e.activations.logits);
  if (!e.quantize_base.empty()) row("dequantized weight (largest)", e.dequantized_weight);
  row("total", e.total);
  return out;
}

}  // namespace hpctrain::train
