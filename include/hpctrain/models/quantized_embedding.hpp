// A frozen token embedding held in 4-bit form (--quantize-embeddings, Note [Quantized embeddings]): its lookup
// dequantizes only the rows it reads, and a head tied to it (or a quantized LM head) multiplies in 4 bits.
//
// Note [Quantized embeddings]
// transformers' bitsandbytes quantizer leaves the input embedding and the output head in full precision, and so does
// --quantize-base (Note [Quantized base]). On a model of a few hundred million parameters with a 32,000-token
// vocabulary they are a fifth of the weights, and held in float32 they are more than half of a 4-bit model's bytes.
// --quantize-embeddings quantizes them too, with the base's options (bitsandbytes' Embedding4bit keeps an embedding
// the same way): the token embedding module gets a submodule `base_4bit` (Quant4State) and its `weight` keeps its name
// with no elements, like a quantized linear layer; an untied LM head is quantized as one of the base's layers. Every
// model looks its tokens up through `embedding_lookup` (a quantized embedding dequantizes only the rows of the batch's ids), and
// detail::lm_head gives the loss and generation the head in 4 bits (LmHead::quantized) where its products run fused
// (float32 on an AVX-512 CPU, Note [Fused 4-bit product]): the logits and their input gradient, in the chunked loss
// chunk by chunk, never hold the head in full precision. Elsewhere (bf16 products, CUDA) it gives the weight
// dequantized whole into the products' dtype, alive while they use it (the chunked loss computes its gradients in
// its forward and keeps none of it for the backward).
// Position embeddings stay as they are (small). Both are frozen: an embedding or head that trains (a module to save,
// resized rows) is not quantized.
#pragma once

#include "hpctrain/models/nf4.hpp"

#include <ATen/core/Tensor.h>
#include <torch/nn/modules/embedding.h>

#include <string>

namespace hpctrain::models {

// ids -> embedding rows, through the 4-bit form when the module is quantized (float32 rows, as the float32 module
// gives), else the module's forward.
[[nodiscard]] at::Tensor embedding_lookup(torch::nn::Embedding& embedding, const at::Tensor& ids);

// Whether the module holds its weight in 4-bit form.
[[nodiscard]] bool embedding_quantized(const torch::nn::EmbeddingImpl& embedding);
// Its 4-bit weight (Error when it is not quantized).
[[nodiscard]] Quant4Weight embedding_4bit(const torch::nn::EmbeddingImpl& embedding);
// The embedding's weight quantized in place (Error naming `name` when it trains or is quantized already).
void quantize_embedding(torch::nn::EmbeddingImpl& embedding, const Quant4Options& options, const std::string& name);
// Back in float32 (the dequantized values), e.g. before a merged model is saved; nothing when not quantized.
void dequantize_embedding(torch::nn::EmbeddingImpl& embedding);

}  // namespace hpctrain::models
