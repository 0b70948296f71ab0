// QLoRA at the model level (Note [Quantized base] in quantized_linear.hpp): which layers of a LoRA model are held in
// 4-bit form, the refusal of a base that is quantized already, and the bytes a model holds.
#pragma once

#include "hpctrain/io/hf_config.hpp"
#include "hpctrain/models/model.hpp"
#include "hpctrain/models/nf4.hpp"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace hpctrain::models {

// What quantize_frozen_base did, for the log.
struct QuantizedBase {
  std::vector<std::string> layers;  // full names of the layers held in 4-bit form
  int64_t weights = 0;              // their weights' elements
  int64_t bytes = 0;                // the 4-bit form's bytes (codes, absmax, nested absmax)
  int64_t float32_bytes = 0;        // the same weights in float32
  Quant4Options options;
  [[nodiscard]] std::string summary() const;
};

class LoraTarget;

// The layers quantize_frozen_base holds in 4-bit form: every LoRA layer whose base weight is frozen (all but the
// modules to save), but a causal LM's head, which stays in full precision as transformers' BitsAndBytes quantizer
// keeps the output embedding (it is a LoRA layer since the chunked loss, Note [LM head] in loss.hpp); with_head
// (--quantize-embeddings, Note [Quantized embeddings]): the head too.
[[nodiscard]] std::vector<std::pair<std::string, LoraTarget*>> quantizable_layers(Model& model, bool with_head = false);

// Every quantizable layer (call after apply_lora / load_adapter) gets its weight in 4-bit form, layer by layer (each
// full-precision weight is freed as soon as it is quantized). Embeddings, norms and heads stay as they are, but with
// options.embeddings the token embedding and the LM head (Note [Quantized embeddings]). Error when no layer is frozen.
// A model with deferred parameters (Note [Deferred materialization]) is materialized here, each quantized weight
// just before it is quantized and the rest after (Note [Quantized at load] in src/models/qlora.cpp).
QuantizedBase quantize_frozen_base(Model& model, const Quant4Options& options);
// Every quantized layer's weight back in float32 (the dequantized values), e.g. before saving a merged model.
void dequantize_base(Model& model);
// The number of layers held in 4-bit form.
[[nodiscard]] int64_t quantized_layer_count(Model& model);

// Error naming the field when config.json carries a quantization_config: a checkpoint quantized already
// (bitsandbytes, GPTQ, AWQ...) holds packed weights hpctrain does not read; --quantize-base quantizes a full-precision
// base itself.
void check_not_prequantized(const io::HfConfig& config);

// Bytes of the model's parameters and buffers on this rank: what its weights take in memory (a 4-bit base counted
// as its codes and absmax).
[[nodiscard]] int64_t model_bytes(const torch::nn::Module& model);

}  // namespace hpctrain::models
