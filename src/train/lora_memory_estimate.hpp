// Private to src/train: estimate-memory under LoRA (Note [LoRA memory arithmetic] in lora_memory_estimate.cpp).
#pragma once

#include <cstdint>
#include <optional>

#include "hpctrain/train/memory_estimate.hpp"

namespace hpctrain::train::detail {

struct LoraShapes {
  ParameterShapes trainable;       // the adapters' lora_A / lora_B and the modules to save
  int64_t adapter_parameters = 0;  // lora_A and lora_B elements: added to the model's parameters
  // With options.quantize (Note [Quantized base]): the frozen linear layers' weights held in 4-bit form.
  int64_t quantized_parameters = 0;  // their elements
  int64_t quantized_bytes = 0;       // their 4-bit bytes
  int64_t largest_quantized = 0;     // elements of the largest one dequantized whole for its product (0: none is)
  bool fused_products = false;       // the linear layers' products run fused (models::quant4_product_fused)
};

// The tensors that train with adapters of rank options.lora_r on options.lora_target_modules, found as `hpctrain
// train` finds them (the model built and models::apply_lora run); nullopt when options.lora_r is 0. Error naming
// --lora-target-modules for a module the model lacks.
[[nodiscard]] std::optional<LoraShapes> lora_shapes(const io::HfConfig& config, const MemoryEstimateOptions& options);

}  // namespace hpctrain::train::detail
