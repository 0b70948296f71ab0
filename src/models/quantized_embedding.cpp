// A frozen token embedding in 4-bit form (quantized_embedding.hpp, Note [Quantized embeddings]).
#include "hpctrain/models/quantized_embedding.hpp"

#include <ATen/ATen.h>

#include "hpctrain/core/error.hpp"
#include "hpctrain/models/quantized_linear.hpp"

namespace hpctrain::models {
namespace {

std::shared_ptr<Quant4StateImpl> state_of(const torch::nn::EmbeddingImpl& embedding) {
  for (const auto& child : const_cast<torch::nn::EmbeddingImpl&>(embedding).named_children())  // a read, not a change
    if (child.key() == kQuant4Submodule) return std::dynamic_pointer_cast<Quant4StateImpl>(child.value());
  return nullptr;
}

}  // namespace

bool embedding_quantized(const torch::nn::EmbeddingImpl& embedding) { return state_of(embedding) != nullptr; }

Quant4Weight embedding_4bit(const torch::nn::EmbeddingImpl& embedding) {
  const auto state = state_of(embedding);
  HPCTRAIN_CHECK(state != nullptr, "the embedding is not quantized");
  return state->weight();
}

at::Tensor embedding_lookup(torch::nn::Embedding& embedding, const at::Tensor& ids) {
  const auto state = state_of(*embedding);
  if (state == nullptr) return embedding->forward(ids);
  return dequantize_4bit_rows(state->weight(), ids, at::kFloat);
}

void quantize_embedding(torch::nn::EmbeddingImpl& embedding, const Quant4Options& options, const std::string& name) {
  HPCTRAIN_CHECK(!embedding_quantized(embedding), "--quantize-embeddings: '{}' is quantized already", name);
  at::Tensor& weight = embedding.weight;
  HPCTRAIN_CHECK(!weight.requires_grad(), "--quantize-embeddings: '{}' trains: only frozen embeddings are quantized",
                 name);
  (void)hold_4bit(embedding, weight, weight, options, name);
}

void dequantize_embedding(torch::nn::EmbeddingImpl& embedding) {
  const auto state = state_of(embedding);
  if (state != nullptr) restore_from_4bit(embedding, embedding.weight, state->weight(), false);
}

}  // namespace hpctrain::models
