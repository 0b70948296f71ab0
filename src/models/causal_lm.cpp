// The next-token loss of the causal LMs (causal_lm.hpp).
#include "hpctrain/models/causal_lm.hpp"

#include "hpctrain/core/error.hpp"
#include "hpctrain/models/quantized_embedding.hpp"
#include "hpctrain/models/quantized_linear.hpp"
#include "models/decoder.hpp"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

namespace hpctrain::models {

namespace {

void check_labels(const at::Tensor& labels, at::IntArrayRef input_shape) {
  HPCTRAIN_CHECK(labels.dim() == 2 && labels.sizes() == input_shape,
                 "causal LM loss: labels must be [batch, sequence] = {} (the input_ids' shape), got {}",
                 c10::str(input_shape), c10::str(labels.sizes()));
  HPCTRAIN_CHECK(labels.scalar_type() == at::kLong, "causal LM loss: labels must be int64 token ids, got {}",
                 std::string(c10::toString(labels.scalar_type())));
}

}  // namespace

at::Tensor shift_labels(const at::Tensor& labels) {
  return at::constant_pad_nd(labels.slice(1, 1), {0, 1}, kIgnoreIndex);
}

TokenLossSum causal_lm_loss_sum(const at::Tensor& logits, const at::Tensor& labels) {
  HPCTRAIN_CHECK(logits.dim() == 3, "causal LM loss: logits must be [batch, sequence, vocab], got {}",
                 c10::str(logits.sizes()));
  check_labels(labels, logits.sizes().slice(0, 2));
  // Position t predicts token t + 1; the last position predicts nothing. The labels are shifted, not the
  // logits (as transformers' ForCausalLMLoss does): slicing [B, L, V] would copy it, and its gradient.
  const at::Tensor shifted_labels = shift_labels(labels).reshape({-1});
  TokenLossSum out;
  out.sum = cross_entropy(logits.reshape({-1, logits.size(2)}), shifted_labels, at::Reduction::Sum);
  out.count = shifted_labels.ne(kIgnoreIndex).sum();
  return out;
}

ModelOutput CausalLM::forward(const ModelInputs& inputs) {
  ModelOutput out;
  out.logits = run_unit(UnitKind::head, hidden_states(inputs), [&](const at::Tensor& hidden) { return head().logits(hidden); });
  if (inputs.labels.defined()) {
    const TokenLossSum loss = causal_lm_loss_sum(out.logits, inputs.labels);
    out.loss = loss.sum / loss.count.to(at::kFloat);
  }
  return out;
}

TokenLossSum CausalLM::next_token_loss(const ModelInputs& inputs, int64_t chunk_tokens) {
  HPCTRAIN_CHECK(inputs.labels.defined(), "{}: next_token_loss needs labels", spec().architecture);
  check_labels(inputs.labels, inputs.input_ids.sizes());
  // The head runs as a unit (Note [Unit hooks]): ZeRO-3 gathers its weight around the chunked loss, which reads it.
  const at::Tensor targets = shift_labels(inputs.labels);
  TokenLossSum out;
  out.sum = run_unit(UnitKind::head, hidden_states(inputs), [&](const at::Tensor& hidden) {
    TokenLossSum loss = linear_cross_entropy(hidden, head(), targets, chunk_tokens);
    out.count = loss.count;
    return loss.sum;
  });
  return out;
}

at::Tensor CausalLM::next_token_losses(const ModelInputs& inputs, int64_t chunk_tokens) {
  HPCTRAIN_CHECK(inputs.labels.defined(), "{}: next_token_losses needs labels", spec().architecture);
  check_labels(inputs.labels, inputs.input_ids.sizes());
  at::NoGradGuard no_grad;
  const at::Tensor targets = shift_labels(inputs.labels);
  return run_unit(UnitKind::head, hidden_states(inputs), [&](const at::Tensor& hidden) {
    return linear_cross_entropy_per_target(hidden, head(), targets, chunk_tokens);
  });
}

}  // namespace hpctrain::models

namespace hpctrain::models::detail {

ModelSpec causal_lm_spec(const std::string& model_type, const std::string& architecture, const std::string& base_prefix,
                         bool tied, std::vector<std::string> ignorable_suffixes) {
  ModelSpec spec;
  spec.model_type = model_type;
  spec.architecture = architecture;
  spec.base_model_prefix = base_prefix;
  if (tied) {
    spec.ignorable_prefixes.push_back("lm_head.");  // Note [Tied head]: transformers re-ties it to the embedding
  } else {
    spec.head_modules.push_back("lm_head");
  }
  spec.ignorable_suffixes = std::move(ignorable_suffixes);
  return spec;
}

namespace {
void check_token_ids(const at::Tensor& ids, const char* model) {
  HPCTRAIN_CHECK(ids.defined() && ids.dim() == 2 && ids.size(1) >= 1 && ids.scalar_type() == at::kLong,
                 "{}: input_ids must be an int64 tensor [batch, sequence] with at least one token", model);
}
}  // namespace

void check_causal_inputs(const ModelInputs& inputs, const char* model) {
  const at::Tensor& ids = inputs.input_ids;
  check_token_ids(ids, model);
  const at::Tensor& mask = inputs.attention_mask;
  HPCTRAIN_CHECK(!mask.defined() || mask.sizes() == ids.sizes(),
                 "{}: attention_mask must have the shape of input_ids {}, got {}", model, c10::str(ids.sizes()),
                 c10::str(mask.sizes()));
  const at::Tensor& positions = inputs.position_ids;
  HPCTRAIN_CHECK(!positions.defined() || (positions.sizes() == ids.sizes() && positions.scalar_type() == at::kLong),
                 "{}: position_ids must be int64 of the shape of input_ids {}, got {} {}", model, c10::str(ids.sizes()),
                 positions.defined() ? c10::toString(positions.scalar_type()) : "", c10::str(positions.sizes()));
}

void check_cached_inputs(const at::Tensor& input_ids, const KvCache& cache, size_t layers, const char* model) {
  check_token_ids(input_ids, model);
  HPCTRAIN_CHECK(cache.num_layers() == layers, "{}: a KV cache for {} layers given to a model of {} layers", model,
                 cache.num_layers(), layers);
}

LmHead lm_head(const LoraLinear& lm_head, const torch::nn::Embedding& embedding, bool training) {
  LmHead head;
  head.training = training;
  // A 4-bit head (Note [Quantized embeddings]) stays in 4 bits where its products run fused, else is dequantized
  // whole into the products' dtype.
  const auto hold = [&](const Quant4Weight& quantized) {
    const c10::Device device = quantized.codes.device();
    const at::ScalarType dtype = quant4_product_dtype(device);
    if (quant4_product_fused(device, dtype)) head.quantized = quantized;
    else head.weight = dequantize_4bit(quantized, dtype);
  };
  if (lm_head.is_empty()) {  // Note [Tied head]
    if (embedding_quantized(*embedding)) hold(embedding_4bit(*embedding));
    else head.weight = embedding->weight;
    return head;
  }
  if (lm_head->base_quantized()) hold(lm_head->quantized_base());
  else head.weight = lm_head->weight;
  if (lm_head->has_lora()) head.adapter = lm_head.get();
  return head;
}

}  // namespace hpctrain::models::detail
