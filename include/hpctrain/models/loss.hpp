// The one place hpctrain computes cross-entropy: from logits (the classifiers, CausalLM::forward's loss) and from
// hidden states through a language model's head in chunks (training, `eval` and `predict` of causal LMs), so that
// no [tokens x vocabulary] tensor outlives a chunk (Note [Chunked loss]).
// Not here: which labels a position predicts (causal_lm.hpp's shift, train/'s label building), MSE and BCE
// (classification_loss in model.hpp).
//
// Note [Chunked loss]
// At real vocabularies the head's logits are a step's largest tensor (Llama-3: 128,256 ids x 8,192 tokens = 4.2 GB
// in fp32, and as much again for each of log_softmax's output and two gradients). linear_cross_entropy never
// builds them:
//  - the tokens whose target is kIgnoreIndex (padding, prompts, document starts, each row's last position) are
//    dropped before the head: their hidden states are never projected;
//  - the rest go through the head chunk_tokens rows at a time. For a chunk it computes the logits, their
//    log-sum-exp in float32 (under bf16 autocast the products run in bf16 and the logits are upcast first, as
//    transformers' loss does) and the loss, and, when a gradient is wanted, at once the gradient of the summed
//    loss: G = softmax - one_hot, grad_hidden[chunk] = G @ W and grad_W += G^T @ hidden[chunk] (float32
//    accumulation). The chunk's buffers are reused by the next chunk and freed at the end, so the forward
//    keeps grad_hidden [kept tokens, D] and grad_W [V, D] (and LoRA's factors' gradients) for backward, which
//    only scales them by the incoming gradient. The products are the three an unchunked head runs (logits,
//    input and weight gradients): no recomputation.
//  - chunk_tokens 0 is the unchunked computation through autograd (the kept tokens' logits at once), kept as the
//    reference the tests and bench/loss compare with.
// The result equals the unchunked one up to summation order (tests/models/loss_test.cpp: 1e-6 relative in fp32).
// backward runs once (a retained graph cannot run it twice: the saved gradients are consumed).
//
// Note [LM head]
// A causal LM's output projection reaches the loss and the logits only through CausalLM::head(): its weight
// (lm_head.weight, or the input embedding when tied, Note [Tied head]) and, when --lora-target-modules names
// lm_head, its LoRA adapter (Note [LoRA]). A head's logits are hidden @ weight^T + (dropout(hidden) @ A^T) @
// (scaling B)^T; the loss takes the adapter's two factors as a second low-rank product of the same chunk, so
// lora_A and lora_B get exact gradients too. A wrapper that must prepare the weight before use (ZeRO-3's
// gather) hooks head().
#pragma once

#include <ATen/core/Reduction.h>
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <optional>

#include "hpctrain/models/nf4.hpp"

namespace hpctrain::models {

class LoraTarget;

// A target that is not predicted (transformers' and PyTorch's ignore_index).
inline constexpr int64_t kIgnoreIndex = -100;

// Rows of the head per chunk when --loss-chunk-tokens is not given (Note [Chunked loss]; chosen in bench/loss:
// from 256 tokens up the step time is flat, and at 128,256 ids a chunk's float32 logits are 128 MiB).
inline constexpr int64_t kDefaultLossChunkTokens = 256;

// Error naming --loss-chunk-tokens unless chunk_tokens >= 0 (tokens per chunk, or 0: unchunked).
void check_loss_chunk_tokens(int64_t chunk_tokens);

// A language model's output projection as the loss sees it (Note [LM head]).
struct LmHead {
  at::Tensor weight;                      // [V, D]: lm_head.weight, or the input embedding when tied; else:
  std::optional<Quant4Weight> quantized;  // the head held in 4 bits, its products fused (Note [Quantized embeddings])
  const LoraTarget* adapter = nullptr;    // the head's layer when it carries a LoRA adapter, else null
  bool training = false;                  // the adapter's dropout is on

  [[nodiscard]] int64_t vocab_size() const { return quantized ? quantized->shape[0] : weight.size(0); }
  [[nodiscard]] int64_t width() const { return quantized ? quantized->shape[1] : weight.size(1); }
  // hidden [..., D] -> logits [..., V] (under autocast in its dtype).
  [[nodiscard]] at::Tensor logits(const at::Tensor& hidden) const;
};

// A loss as a sum and the number of targets it is over (Note [Objectives]).
struct TokenLossSum {
  at::Tensor sum;    // float32 scalar (with grad): cross-entropy summed over the predicted targets
  at::Tensor count;  // int64 scalar on the targets' device: how many targets are not kIgnoreIndex
};

// -log softmax(hidden @ head)[target] summed over the targets that are not kIgnoreIndex (Note [Chunked loss]).
// hidden [..., D] (any floating dtype, with grad), targets int64 with hidden's leading shape. The targets may stay
// on the CPU while hidden is on a device: the kept positions are then found without a device sync.
// chunk_tokens: head rows per chunk (> 0), or 0 for the unchunked computation. Error naming the shapes, or a
// target outside [0, vocabulary).
[[nodiscard]] TokenLossSum linear_cross_entropy(const at::Tensor& hidden, const LmHead& head, const at::Tensor& targets,
                                                int64_t chunk_tokens);

// The same loss per target, float32 with targets' shape (0 where the target is kIgnoreIndex), on hidden's device.
// No gradient: evaluation and prediction.
[[nodiscard]] at::Tensor linear_cross_entropy_per_target(const at::Tensor& hidden, const LmHead& head,
                                                         const at::Tensor& targets, int64_t chunk_tokens);

// Cross-entropy of logits [N, C] against int64 targets [N] (kIgnoreIndex left out), reduced as at::Reduction says
// (Mean: over the targets kept). bf16/fp16 logits are upcast to float32 first (as transformers does); float32
// and float64 are used as they are.
[[nodiscard]] at::Tensor cross_entropy(const at::Tensor& logits, const at::Tensor& targets,
                                       at::Reduction::Reduction reduction);

}  // namespace hpctrain::models
