// Private to src/models: pieces the causal LMs (gpt2.cpp, llama.cpp) share.
#pragma once

#include "hpctrain/models/kv_cache.hpp"
#include "hpctrain/models/lora.hpp"
#include "hpctrain/models/loss.hpp"
#include "hpctrain/models/model.hpp"

#include <ATen/core/Tensor.h>
#include <torch/nn/modules/embedding.h>

#include <string>
#include <vector>

namespace hpctrain::models::detail {

// The spec of a causal LM whose base model is under `base_prefix`: untied, "lm_head" is a head module; tied,
// a checkpoint's lm_head.weight is ignored (Note [Tied head]). `ignorable_suffixes`: legacy buffers.
[[nodiscard]] ModelSpec causal_lm_spec(const std::string& model_type, const std::string& architecture,
                                       const std::string& base_prefix, bool tied,
                                       std::vector<std::string> ignorable_suffixes = {});

// Error naming `model` unless input_ids is int64 [B, L] with L >= 1 and attention_mask, when given, [B, L].
void check_causal_inputs(const ModelInputs& inputs, const char* model);

// Error naming `model` unless input_ids is int64 [B, L] with L >= 1 and `cache` is for `layers` layers.
void check_cached_inputs(const at::Tensor& input_ids, const KvCache& cache, size_t layers, const char* model);

// Note [LM head]: lm_head's weight and adapter, or the input embedding's weight when the head is tied (lm_head
// null, Note [Tied head]); `training` turns the adapter's dropout on.
[[nodiscard]] LmHead lm_head(const LoraLinear& lm_head, const torch::nn::Embedding& embedding, bool training);

}  // namespace hpctrain::models::detail
