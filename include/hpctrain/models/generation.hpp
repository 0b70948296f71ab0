// Text generation with a causal LM, ids in and ids out: greedy decoding, or sampling with transformers' logits
// warpers (temperature, then top-k, then top-p), over a KV cache (kv_cache.hpp: the prompt runs once, then one
// position per new token). One sequence at a time.
// Not here: tokenization (models never see tokenize/: the CLI encodes and decodes), batches of prompts, beam
// search, repetition penalties.
#pragma once

#include "hpctrain/core/memory_info.hpp"
#include "hpctrain/core/random.hpp"
#include "hpctrain/models/causal_lm.hpp"

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <vector>

namespace hpctrain::models {

struct GenerationOptions {
  int64_t max_new_tokens = 20;  // >= 1
  // 0: greedy (the first most likely token, as torch.argmax); > 0: sample from softmax(logits / temperature).
  double temperature = 0.0;
  int64_t top_k = 0;   // sampling: keep the top_k most likely tokens (ties with the k-th kept); 0 = all
  double top_p = 1.0;  // sampling: keep the most likely tokens whose probabilities sum to >= top_p, in (0, 1]
  // Sampling: the draws come from SplitMix64(seed), so a seed gives the same tokens on every run and machine; not
  // torch's generator, so transformers with torch.manual_seed(seed) draws other tokens.
  uint64_t seed = 0;
  // Generation stops after any of these (which ends the new ids); empty: only max_new_tokens stops it.
  std::vector<int64_t> eos_token_ids;
  // false: the whole sequence again for every new token (no KV cache; for tests and checks).
  bool use_cache = true;
};

// Error naming the field, what it must be and its value, for any out-of-range option.
void check_generation_options(const GenerationOptions& options);

// What bounds a generation: the positions the model has (GPT-2's n_positions, Llama's and Qwen2's
// max_position_embeddings; `field` names the config key) and the bytes its KV cache holds per token (float32).
struct GenerationLimits {
  int64_t max_positions = 0;
  const char* field = "";
  int64_t kv_bytes_per_token = 0;
};
[[nodiscard]] GenerationLimits generation_limits(const io::HfConfig& config);
// Error ("max_new_tokens: ...", naming the limit) when the prompt and max_new_tokens exceed the model's positions,
// or when their KV cache exceeds `memory` (core::available_host_memory(); unchecked when nullopt). Checked before
// any arithmetic can overflow: max_new_tokens may be any value >= 1.
void check_generation_fits(const io::HfConfig& config, int64_t prompt_length, int64_t max_new_tokens,
                           std::optional<core::HostMemory> memory);

// The new ids after `prompt_ids` (at least one id, each in [0, vocab_size)): at most max_new_tokens of them,
// ending with an EOS id when generation stopped at one. Runs under no-grad in the model's mode (eval() it).
[[nodiscard]] std::vector<int64_t> generate(CausalLM& model, const std::vector<int64_t>& prompt_ids,
                                            const GenerationOptions& options);
// transformers' num_return_sequences: `sequences` continuations of the prompt, one after the other, drawn from one
// SplitMix64(options.seed) stream (the first equals generate()'s). More than one needs sampling (temperature > 0).
[[nodiscard]] std::vector<std::vector<int64_t>> generate(CausalLM& model, const std::vector<int64_t>& prompt_ids,
                                                         const GenerationOptions& options, int64_t sequences);

// The id that follows `logits` [vocab] of the last position: greedy, or drawn from `rng` after the warpers.
[[nodiscard]] int64_t next_token(const at::Tensor& logits, const GenerationOptions& options, SplitMix64& rng);

// transformers' TopKLogitsWarper / TopPLogitsWarper on logits [..., vocab]: removed tokens become -inf.
// top_k 0 and top_p 1 keep everything; at least one token is always kept.
[[nodiscard]] at::Tensor top_k_filtered(const at::Tensor& logits, int64_t top_k);
[[nodiscard]] at::Tensor top_p_filtered(const at::Tensor& logits, double top_p);

// The EOS ids of a model folder as transformers' generate finds them: generation_config.json's eos_token_id when
// the file has one, else config.json's; an int or a list of ints (empty when neither names one). Error naming
// the file for another type.
[[nodiscard]] std::vector<int64_t> eos_token_ids(const std::filesystem::path& model_dir);

}  // namespace hpctrain::models
