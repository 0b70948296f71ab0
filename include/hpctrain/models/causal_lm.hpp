// The second model kind: decoder-only causal language models (GPT-2 in gpt2.hpp; Llama and Qwen2 in
// llama.hpp). forward(inputs) -> logits [B, L, vocab_size] for every position (+ the mean next-token loss
// when labels are given), the per-token loss sum the training objective needs, and forward_cached, the
// inference forward over a KV cache (Note [KV cache] in kv_cache.hpp).
// Not here: the decoding loop and the samplers (generation.hpp), the training objective (train/).
//
// Note [Tied head]
// With tie_word_embeddings (GPT-2's default; Llama's and Qwen2's is false) the head is the input embedding:
// the model registers no lm_head parameter and computes logits = hidden @ embedding^T. So state_dict() has
// no "lm_head.weight", exactly as transformers' save_pretrained writes a tied model (it drops the tied
// key), the optimizer and the gradient reducer see one tensor, and a checkpoint that carries lm_head.weight
// anyway has it reported as ignored (transformers re-ties it to the embedding after loading).
// Untied, "lm_head" is a head module: a base checkpoint without it loads with lm_head newly initialized.
#pragma once

#include "hpctrain/models/kv_cache.hpp"
#include "hpctrain/models/model.hpp"

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace hpctrain::models {

// A label that is not predicted (transformers' and PyTorch's ignore_index).
inline constexpr int64_t kIgnoreIndex = -100;

// The labels each position predicts: labels[:, 1:] and kIgnoreIndex for the last position, [B, L] like the
// logits, so that the loss reads logits [B, L, V] as they are (slicing them would copy [B, L, V]).
[[nodiscard]] at::Tensor shift_labels(const at::Tensor& labels);

// A micro-batch's next-token loss as a sum and the number of tokens it is over (Note [Objectives]).
struct TokenLossSum {
  at::Tensor sum;    // float32 scalar (with grad): cross-entropy summed over the predicted tokens
  at::Tensor count;  // int64 scalar on the labels' device: how many labels are not -100 (no host sync)
};

// transformers' causal-LM shift: logits[:, :-1] predict labels[:, 1:]; labels -100 are not predicted.
// logits [B, L, V] (any floating dtype; the loss is computed in float32), labels int64 [B, L].
// sum / count is the loss transformers' *ForCausalLM returns (NaN when nothing is predicted, as there).
[[nodiscard]] TokenLossSum causal_lm_loss_sum(const at::Tensor& logits, const at::Tensor& labels);

// A causal LM: forward(inputs) uses input_ids [B, L] and attention_mask [B, L] (1 = token, 0 = padding, left
// or right; absent = no padding). Positions are 0..L-1 whatever the mask, as transformers' forward without
// position_ids; or position_ids [B, L], where each 0 starts a document that attends to nothing before it (rows
// packed from documents, Note [Packed attention]). labels [B, L] -> loss = causal_lm_loss_sum's sum / count.
class CausalLM : public Model {
 public:
  using Model::Model;
  [[nodiscard]] virtual int64_t vocab_size() const = 0;
  // Note [Tied head]: true when the head is the input embedding (no lm_head parameter).
  [[nodiscard]] virtual bool tied_head() const = 0;

  // Note [KV cache]: the logits [B, L, vocab_size] of input_ids int64 [B, L] (no padding) at positions
  // cache.length() ... + L - 1, attending to the cached tokens before them; the cache then holds these L too.
  // With an empty cache the logits equal forward()'s (up to summation order).
  [[nodiscard]] virtual at::Tensor forward_cached(const at::Tensor& input_ids, KvCache& cache) = 0;
  // An empty cache for this model's layers; `reserve`: the tokens expected (prompt + new ones).
  [[nodiscard]] KvCache new_kv_cache(int64_t reserve = 0) { return KvCache(transformer_layers().size(), reserve); }

 protected:
  // logits, and the loss when inputs.labels is defined.
  [[nodiscard]] static ModelOutput output_of(at::Tensor logits, const ModelInputs& inputs);
};

}  // namespace hpctrain::models
