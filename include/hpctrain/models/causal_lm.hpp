// The second model kind: decoder-only causal language models (GPT-2 in gpt2.hpp; Llama and Qwen2 in
// llama.hpp). forward(inputs) -> logits [B, L, vocab_size] for every position (+ the mean next-token loss
// when labels are given); next_token_loss, the loss training and evaluation use, from the final hidden states
// through the head without those logits (Note [Chunked loss] in loss.hpp); and forward_cached, the inference
// forward over a KV cache (Note [KV cache] in kv_cache.hpp).
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
#include "hpctrain/models/loss.hpp"
#include "hpctrain/models/model.hpp"

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace hpctrain::models {

// The labels each position predicts: labels[:, 1:] and kIgnoreIndex for the last position, [B, L] like the
// logits, so that the loss reads logits [B, L, V] as they are (slicing them would copy [B, L, V]).
[[nodiscard]] at::Tensor shift_labels(const at::Tensor& labels);

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

  // logits = head().logits(hidden_states(inputs)), and the loss when inputs.labels is defined.
  ModelOutput forward(const ModelInputs& inputs) override;
  // The final norm's output [B, L, D] for inputs.input_ids and inputs.attention_mask: what the head projects.
  [[nodiscard]] virtual at::Tensor hidden_states(const ModelInputs& inputs) = 0;
  // Note [LM head]: the head's weight (and adapter), the one place forward, forward_cached and the losses read it.
  [[nodiscard]] virtual LmHead head() = 0;

  // The next-token loss of inputs.labels (int64 [B, L], -100 = not predicted; shifted here: position t predicts
  // labels[:, t + 1]) as a sum and a count, from hidden_states through head() in chunks of chunk_tokens (0:
  // unchunked), without the [B, L, V] logits (Note [Chunked loss]). The labels may stay on the CPU.
  [[nodiscard]] TokenLossSum next_token_loss(const ModelInputs& inputs, int64_t chunk_tokens);
  // The same per position, float32 [B, L] (0 where nothing is predicted), no gradient: evaluation, prediction.
  [[nodiscard]] at::Tensor next_token_losses(const ModelInputs& inputs, int64_t chunk_tokens);

  // Note [KV cache]: the logits [B, L, vocab_size] of input_ids int64 [B, L] (no padding) at positions
  // cache.length() ... + L - 1, attending to the cached tokens before them; the cache then holds these L too.
  // With an empty cache the logits equal forward()'s (up to summation order).
  [[nodiscard]] virtual at::Tensor forward_cached(const at::Tensor& input_ids, KvCache& cache) = 0;
  // An empty cache for this model's layers; `reserve`: the tokens expected (prompt + new ones).
  [[nodiscard]] KvCache new_kv_cache(int64_t reserve = 0) { return KvCache(transformer_layers().size(), reserve); }
};

}  // namespace hpctrain::models
