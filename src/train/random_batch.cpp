// random_batch.hpp: random token ids for the single-rank measurements.
#include "random_batch.hpp"

#include <ATen/ATen.h>

#include "hpctrain/core/error.hpp"
#include "hpctrain/models/causal_lm.hpp"
#include "hpctrain/models/registry.hpp"

namespace hpctrain::train {
namespace {

int64_t vocab_size(const io::HfConfig& config) {
  const std::string& type = config.model_type();
  if (type == "distilbert") return config.distilbert().vocab_size;
  if (type == "bert") return config.bert().vocab_size;
  if (type == "gpt2") return config.gpt2().vocab_size;
  if (type == "llama" || type == "qwen2") return config.llama_family().vocab_size;
  fail("--measure: model_type '{}' takes no token ids (distilbert, bert, gpt2, llama and qwen2 do)", type);
}

}  // namespace

models::ModelInputs random_token_batch(const io::HfConfig& config, const MemoryEstimateOptions& o) {
  const int64_t vocab = vocab_size(config);
  models::ModelInputs inputs;
  inputs.input_ids = at::randint(vocab, {o.batch_size, o.sequence_length}, at::kLong);
  if (models::model_kind(config.model_type()) == models::ModelKind::causal_lm) {
    // Packed rows, as `train` passes them: no mask (Note [Causal-LM labels]); the model shifts the labels.
    inputs.labels = inputs.input_ids;
    return inputs;
  }
  inputs.attention_mask = at::ones({o.batch_size, o.sequence_length}, at::kLong);
  inputs.labels = at::randint(config.common.num_labels(), {o.batch_size}, at::kLong);
  return inputs;
}

at::Tensor measured_loss(models::Model& model, const models::ModelInputs& inputs, const MemoryEstimateOptions& options) {
  auto* lm = dynamic_cast<models::CausalLM*>(&model);
  if (lm == nullptr) return model.forward(inputs).loss;
  const models::TokenLossSum loss = lm->next_token_loss(inputs, options.loss_chunk_tokens);
  return loss.sum / loss.count.to(at::kFloat);
}

}  // namespace hpctrain::train
