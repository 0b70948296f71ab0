// QLoRA at the model level (qlora.hpp, Note [Quantized base]).
#include "hpctrain/models/qlora.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "hpctrain/core/error.hpp"
#include "hpctrain/core/host_allocator.hpp"
#include "hpctrain/models/causal_lm.hpp"
#include "hpctrain/models/lora.hpp"
#include "hpctrain/models/materialize.hpp"
#include "hpctrain/models/quantized_embedding.hpp"

namespace hpctrain::models {
namespace {

// The module's full name in the model ("transformer.wte").
std::string embedding_name(Model& model, const torch::nn::EmbeddingImpl* embedding) {
  for (const auto& item : model.named_modules())
    if (item.value().get() == embedding) return item.key();
  return "input embeddings";
}

}  // namespace

std::string QuantizedBase::summary() const {
  return fmt::format("--quantize-base {}{}{}: {} frozen layers ({} weights) in 4-bit form, {:.1f} MiB instead of "
                     "{:.1f} MiB in float32 ({:.3f} bits per weight, blocks of {})",
                     to_string(options.type), options.double_quant ? " --double-quant" : "",
                     options.embeddings ? " --quantize-embeddings" : "", layers.size(), weights,
                     static_cast<double>(bytes) / (1 << 20), static_cast<double>(float32_bytes) / (1 << 20),
                     weights > 0 ? 8.0 * static_cast<double>(bytes) / static_cast<double>(weights) : 0.0,
                     options.blocksize);
}

namespace {

// Whether `layer` is a causal LM's head (lm_head, or the embeddings it is tied to).
bool is_causal_lm_head(Model& model, const LoraTarget& layer) {
  if (dynamic_cast<CausalLM*>(&model) == nullptr) return false;
  const std::vector<torch::nn::Module*> head = model.unit_modules(UnitKind::head);
  const auto* module = dynamic_cast<const torch::nn::Module*>(&layer);
  return std::find(head.begin(), head.end(), module) != head.end();
}

}  // namespace

std::vector<std::pair<std::string, LoraTarget*>> quantizable_layers(Model& model, bool with_head) {
  std::vector<std::pair<std::string, LoraTarget*>> out;
  for (const auto& [name, layer] : lora_target_layers(model)) {
    if (layer->base_weight().requires_grad()) continue;  // a module to save trains
    if (!with_head && is_causal_lm_head(model, *layer)) continue;
    out.emplace_back(name, layer);
  }
  return out;
}

QuantizedBase quantize_frozen_base(Model& model, const Quant4Options& options) {
  check_quant4_blocksize(options.blocksize);
  QuantizedBase out;
  out.options = options;
  // Note [Quantized at load]
  // `hpctrain train --quantize-base` builds the model with deferred parameters (Note [Deferred materialization]),
  // maps the checkpoint (values copied when a parameter is materialized, models::defer_pretrained_weights), and
  // attaches the adapters to the deferred base (eval, predict and generate: models::load_quantized_with_adapter). Here each frozen weight gets its memory (the mapped value, or its
  // seeded initialization) just before it is quantized and freed, so at most one layer is ever in float32; the
  // norms, biases and heads that stay in full precision are materialized after. The callers hold glibc's default
  // heap thresholds meanwhile (core::LiveTensorResidency), and defer_pretrained_weights drops each value's mapped
  // file pages once read: the load's peak is about the 4-bit model plus one layer, not the float32 model (bench/README.md, "QLoRA").
  const bool deferred = model.deferred_seed().has_value();
  const auto record = [&](const std::string& name, int64_t numel, const Quant4Weight& quantized) {
    out.layers.push_back(name);
    out.weights += numel;
    out.bytes += quantized.bytes();
    out.float32_bytes += 4 * numel;
  };
  for (const auto& [name, layer] : quantizable_layers(model, options.embeddings)) {
    if (layer->base_quantized()) continue;
    if (deferred) materialize(model, {name + ".weight"});
    const int64_t numel = layer->base_weight().numel();
    layer->quantize_base(options, name);
    record(name, numel, layer->quantized_base());
  }
  if (options.embeddings) {  // Note [Quantized embeddings]
    torch::nn::EmbeddingImpl* embedding = model.input_embeddings();
    HPCTRAIN_CHECK(embedding != nullptr, "--quantize-embeddings: {} has no token embedding", model.spec().architecture);
    if (!embedding_quantized(*embedding)) {
      const std::string name = embedding_name(model, embedding);
      if (deferred) materialize(model, {name + ".weight"});
      const int64_t numel = embedding->weight.numel();
      quantize_embedding(*embedding, options, name);
      record(name, numel, embedding_4bit(*embedding));
    }
  }
  HPCTRAIN_CHECK(!out.layers.empty(), "--quantize-base: {} has no frozen linear layer to quantize",
                 model.spec().architecture);
  materialize_all(model);  // the norms, position embeddings, biases, heads that stay in full precision
  // The float32 weights just freed sit in the heap (the tuned heap keeps what it frees, Note [Host allocator]), and
  // nothing of that size comes back: returned to the OS, the resident set is the 4-bit model's, not the float32 one's.
  core::release_free_heap_memory();
  return out;
}

void dequantize_base(Model& model) {
  for (const auto& [name, layer] : lora_target_layers(model)) layer->dequantize_base();
  if (torch::nn::EmbeddingImpl* embedding = model.input_embeddings()) dequantize_embedding(*embedding);
}

int64_t quantized_layer_count(Model& model) {
  int64_t count = 0;
  for (const auto& [name, layer] : lora_target_layers(model)) count += layer->base_quantized() ? 1 : 0;
  if (torch::nn::EmbeddingImpl* embedding = model.input_embeddings()) count += embedding_quantized(*embedding) ? 1 : 0;
  return count;
}

void check_not_prequantized(const io::HfConfig& config) {
  const nlohmann::json& raw = config.raw();
  if (!raw.is_object() || !raw.contains("quantization_config")) return;
  const nlohmann::json& q = raw["quantization_config"];
  const std::string method = q.is_object() && q.contains("quant_method") && q["quant_method"].is_string()
                                 ? q["quant_method"].get<std::string>() : "unknown";
  fail("'{}': quantization_config (quant_method {}): this base is quantized already, and hpctrain reads full-precision "
       "weights only\n  hint: pass the unquantized base as --model; --quantize-base nf4 quantizes it at load as "
       "bitsandbytes does", config.source(), method);
}

int64_t model_bytes(const torch::nn::Module& model) {
  int64_t bytes = 0;
  for (const auto& p : model.parameters()) bytes += static_cast<int64_t>(p.nbytes());
  for (const auto& b : model.buffers()) bytes += static_cast<int64_t>(b.nbytes());
  return bytes;
}

}  // namespace hpctrain::models
