// Private: random token-id batches for the single-rank measurements (estimate-memory --measure, bench predict).
#pragma once

#include "hpctrain/io/hf_config.hpp"
#include "hpctrain/models/model.hpp"
#include "hpctrain/train/memory_estimate.hpp"

namespace hpctrain::train {

// options.batch_size x options.sequence_length random token ids (all attended) and random labels, for a
// distilbert or bert config; for a causal LM (gpt2, llama, qwen2) the labels are the ids and there is no mask, as
// for packed rows. An Error names any other model_type.
models::ModelInputs random_token_batch(const io::HfConfig& config, const MemoryEstimateOptions& options);

// The mean loss of `inputs` as `hpctrain train`'s objective computes it: a causal LM's next-token loss without the
// [B, L, V] logits, in chunks of options.loss_chunk_tokens (Note [Chunked loss]); a classifier's forward loss.
[[nodiscard]] at::Tensor measured_loss(models::Model& model, const models::ModelInputs& inputs,
                                       const MemoryEstimateOptions& options);

}  // namespace hpctrain::train
