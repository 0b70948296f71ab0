// lora_shapes (lora_memory_estimate.hpp).
#include "lora_memory_estimate.hpp"

#include <algorithm>

#include "hpctrain/core/error.hpp"
#include "hpctrain/models/causal_lm.hpp"
#include "hpctrain/models/lora.hpp"
#include "hpctrain/models/model_flops.hpp"
#include "hpctrain/models/qlora.hpp"
#include "hpctrain/models/quantized_linear.hpp"
#include "hpctrain/models/registry.hpp"
#include "lora_setup.hpp"

namespace hpctrain::train::detail {

// Note [LoRA memory arithmetic]
// Under --lora-r (Note [LoRA] in models/lora.hpp) every rank still holds the base's fp32 weights, plus the
// adapters' lora_A [r, in] and lora_B [out, r] per target; gradients, the reducer's buckets (and ZeRO's shards of
// them) and the optimizer's state exist for the trainable tensors only: the adapters and the modules to save
// (PEFT's default for the task: the classifier heads). The activations are counted as in full fine-tuning: the
// layers keep the same inputs for the input gradients the adapters need, and the adapters' own [T, r]
// activations are negligible; but a decoder's frozen weights get no autocast bf16 copies, and its frozen head and
// embedding no weight gradients (src/train/decoder_memory_estimate.cpp; measured: with them counted, the estimate of
// a bf16 QLoRA step with gradient checkpointing on a 350 M Llama was 2.6x its measured peak). With --quantize-base (QLoRA, Note [Quantized base]) the frozen linear layers' weights
// count at their 4-bit bytes (models::quant4_bytes: codes, absmax, nested absmax) instead of 4 per weight, plus the
// largest of them dequantized in the activations' dtype: the one weight that exists in full precision at a time,
// during its layer's product; none where the products run fused (float32 on an AVX-512 CPU, Note [Fused 4-bit
// product]: their working set, under 1 MiB per thread plus x transposed for up to 256 tokens, is not counted). With
// --quantize-embeddings the token embedding and the LM head count in 4 bits too; where the products are not fused
// the head, dequantized whole for the loss, is then the largest.
std::optional<LoraShapes> lora_shapes(const io::HfConfig& config, const MemoryEstimateOptions& options) {
  if (options.lora_r == 0) return std::nullopt;
  HPCTRAIN_CHECK(options.lora_r > 0, "--lora-r {}: expected > 0 (0 = full fine-tuning)", options.lora_r);
  const std::shared_ptr<models::Model> model = models::build_model(config);
  TrainOptions train_options;  // lora_config_of: the options `hpctrain train` resolves the same way
  train_options.lora_r = options.lora_r;
  train_options.lora_target_modules = options.lora_target_modules;
  std::optional<models::LoraConfig> lora = lora_config_of(train_options, *model);
  (void)models::apply_lora(*model, *lora);
  LoraShapes out;
  for (const auto& item : model->named_parameters())
    if (item.value().requires_grad()) out.trainable.emplace_back(item.key(), item.value().sizes().vec());
  out.adapter_parameters = static_cast<int64_t>(models::weight_gradients(*model).outside_base);
  if (!options.quantize) return out;
  const bool embeddings = options.quantize->embeddings;  // Note [Quantized embeddings]: also the head
  // A float32 product on this CPU never holds its weight whole (Note [Fused 4-bit product]), the head's included.
  const at::ScalarType dtype = options.precision == "bf16" ? at::kBFloat16 : at::kFloat;
  const bool fused = models::quant4_product_fused(c10::Device(c10::kCPU), dtype);
  out.fused_products = fused;
  for (const auto& [name, layer] : models::quantizable_layers(*model, embeddings)) {  // those quantize_frozen_base quantizes
    const int64_t numel = layer->base_weight().numel();
    out.quantized_parameters += numel;
    out.quantized_bytes += models::quant4_bytes(numel, *options.quantize);
    if (!fused) out.largest_quantized = std::max(out.largest_quantized, numel);
  }
  if (torch::nn::EmbeddingImpl* embedding = embeddings ? model->input_embeddings() : nullptr) {
    const int64_t numel = embedding->weight.numel();  // looked up row by row; a head tied to it is a product
    out.quantized_parameters += numel;
    out.quantized_bytes += models::quant4_bytes(numel, *options.quantize);
    const auto* causal = dynamic_cast<const models::CausalLM*>(model.get());
    if (!fused && causal != nullptr && causal->tied_head())
      out.largest_quantized = std::max(out.largest_quantized, numel);
  }
  return out;
}

}  // namespace hpctrain::train::detail
