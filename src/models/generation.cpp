// Greedy and sampled generation over a KV cache (generation.hpp).
#include "hpctrain/models/generation.hpp"

#include "hpctrain/core/error.hpp"
#include "hpctrain/core/memory_info.hpp"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <optional>

namespace hpctrain::models {

namespace {

namespace fs = std::filesystem;

void check_prompt(const std::vector<int64_t>& prompt_ids, int64_t vocab_size) {
  HPCTRAIN_CHECK(!prompt_ids.empty(), "generate: the prompt has no tokens (expected at least one id)");
  for (size_t i = 0; i < prompt_ids.size(); ++i) {
    HPCTRAIN_CHECK(prompt_ids[i] >= 0 && prompt_ids[i] < vocab_size,
                   "generate: prompt id {} (position {}) is outside the model's vocabulary [0, {}): is the tokenizer "
                   "the model's?",
                   prompt_ids[i], i, vocab_size);
  }
}

at::Device device_of(CausalLM& model) {
  const auto parameters = model.parameters();
  return parameters.empty() ? at::Device(at::kCPU) : parameters.front().device();
}

// The logits [vocab] that follow `sequence`: with a cache, the forward of the tokens it does not hold yet (the
// whole prompt first, then one token); without, the forward of the whole sequence.
at::Tensor last_logits(CausalLM& model, KvCache* cache, const std::vector<int64_t>& sequence, at::Device device) {
  const int64_t first = cache != nullptr ? cache->length() : 0;
  const std::vector<int64_t> fresh(sequence.begin() + first, sequence.end());
  const at::Tensor ids = at::tensor(fresh, at::kLong).view({1, -1}).to(device);
  if (cache != nullptr) return model.forward_cached(ids, *cache)[0][-1];
  ModelInputs inputs;
  inputs.input_ids = ids;
  return model.forward(inputs).logits[0][-1];
}

// A uniform double in [0, 1) from 53 random bits.
double uniform01(SplitMix64& rng) { return static_cast<double>(rng.next() >> 11) * 0x1.0p-53; }

// Inverse-CDF draw from `probs` [vocab] (summing to about 1; zeros are never drawn). Error when no token has a
// probability > 0 or one is not finite: never an id the distribution did not choose (Note [Safe sampling]).
int64_t draw_token(const at::Tensor& probs, SplitMix64& rng) {
  const at::Tensor p = probs.to(at::kCPU, at::kDouble).contiguous();
  const double* values = p.data_ptr<double>();
  const int64_t vocab = p.numel();
  double total = 0;
  int64_t last_drawable = -1;
  for (int64_t i = 0; i < vocab; ++i) {
    HPCTRAIN_CHECK(std::isfinite(values[i]) && values[i] >= 0, "generate: the probability of token {} is {}: expected "
                   "a finite number >= 0 (the model's logits hold NaN or Inf?)", i, values[i]);
    total += values[i];
    if (values[i] > 0) last_drawable = i;
  }
  HPCTRAIN_CHECK(last_drawable >= 0 && std::isfinite(total), "generate: no token has a probability > 0 (sum {})",
                 total);
  const double target = uniform01(rng) * total;
  double cumulative = 0;
  for (int64_t i = 0; i < vocab; ++i) {
    if (!(values[i] > 0)) continue;
    cumulative += values[i];
    if (cumulative > target) return i;
  }
  return last_drawable;  // rounding left the target at the very end: the last token with a probability > 0
}

std::vector<int64_t> ids_of(const nlohmann::json& value, const fs::path& file) {
  const auto is_id = [](const nlohmann::json& v) { return v.is_number_integer() && v.get<int64_t>() >= 0; };
  if (is_id(value)) return {value.get<int64_t>()};
  HPCTRAIN_CHECK(value.is_array() && std::all_of(value.begin(), value.end(), is_id),
                 "{}: eos_token_id must be a token id or a list of token ids (integers >= 0), got {}", file.string(),
                 value.dump());
  return value.get<std::vector<int64_t>>();
}

// The file's eos_token_id when it is present and not null.
std::optional<std::vector<int64_t>> eos_ids_in(const fs::path& file) {
  std::ifstream in(file);
  HPCTRAIN_CHECK(in.good(), "{}: cannot be opened", file.string());
  const nlohmann::json object = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  HPCTRAIN_CHECK(object.is_object(), "{}: expected a JSON object (is the file complete?)", file.string());
  const auto found = object.find("eos_token_id");
  if (found == object.end() || found->is_null()) return std::nullopt;
  return ids_of(*found, file);
}

// One continuation of `prompt_ids` (checked) with a fresh KV cache, drawing from `rng`.
std::vector<int64_t> continue_prompt(CausalLM& model, const std::vector<int64_t>& prompt_ids,
                                     const GenerationOptions& options, SplitMix64& rng) {
  at::NoGradGuard no_grad;
  const at::Device device = device_of(model);
  KvCache cache = model.new_kv_cache(static_cast<int64_t>(prompt_ids.size()) + options.max_new_tokens);
  std::vector<int64_t> sequence = prompt_ids, new_ids;
  const auto is_eos = [&](int64_t id) {
    return std::find(options.eos_token_ids.begin(), options.eos_token_ids.end(), id) != options.eos_token_ids.end();
  };
  while (static_cast<int64_t>(new_ids.size()) < options.max_new_tokens) {
    const at::Tensor logits = last_logits(model, options.use_cache ? &cache : nullptr, sequence, device);
    const int64_t token = next_token(logits, options, rng);
    new_ids.push_back(token);
    sequence.push_back(token);
    if (is_eos(token)) break;
  }
  return new_ids;
}

}  // namespace

void check_generation_options(const GenerationOptions& o) {
  HPCTRAIN_CHECK(o.max_new_tokens >= 1, "max_new_tokens: expected at least 1 token, got {}", o.max_new_tokens);
  HPCTRAIN_CHECK(std::isfinite(o.temperature) && o.temperature >= 0,
                 "temperature: expected a number >= 0 (0 = greedy), got {}", o.temperature);
  HPCTRAIN_CHECK(o.top_k >= 0, "top_k: expected a number of tokens >= 0 (0 = all), got {}", o.top_k);
  HPCTRAIN_CHECK(o.top_p > 0 && o.top_p <= 1, "top_p: expected a probability in (0, 1] (1 = all), got {}", o.top_p);
}

GenerationLimits generation_limits(const io::HfConfig& config) {
  constexpr int64_t kFloatBytes = 4;  // generation runs in float32
  if (config.model_type() == "gpt2") {
    const io::Gpt2Config& c = config.gpt2();
    return {c.n_positions, "n_positions", 2 * c.n_layer * c.n_embd * kFloatBytes};
  }
  const io::LlamaConfig& c = config.llama_family();
  return {c.max_position_embeddings, "max_position_embeddings",
          2 * c.num_hidden_layers * c.kv_heads() * c.head_size() * kFloatBytes};
}

void check_generation_fits(const io::HfConfig& config, int64_t prompt_length, int64_t max_new_tokens,
                           std::optional<core::HostMemory> memory) {
  const GenerationLimits limits = generation_limits(config);
  const int64_t room = limits.max_positions - prompt_length;  // both validated: no overflow
  HPCTRAIN_CHECK(max_new_tokens <= room, "max_new_tokens: {} new tokens after a prompt of {} exceed the model's {} "
                 "{} ({}); expected at most {}", max_new_tokens, prompt_length, limits.field, limits.max_positions,
                 config.source(), std::max<int64_t>(room, 0));
  if (!memory) return;
  const int64_t tokens_that_fit = memory->bytes / std::max<int64_t>(limits.kv_bytes_per_token, 1);
  HPCTRAIN_CHECK(prompt_length + max_new_tokens <= tokens_that_fit,
                 "max_new_tokens: {} new tokens after a prompt of {} need a KV cache of {:.3g} GiB ({} bytes per "
                 "token), but {} are available ({}); expected at most {} new tokens", max_new_tokens, prompt_length,
                 static_cast<double>(prompt_length + max_new_tokens) * static_cast<double>(limits.kv_bytes_per_token) /
                     (1 << 30),
                 limits.kv_bytes_per_token, core::format_bytes(memory->bytes), memory->source,
                 std::max<int64_t>(tokens_that_fit - prompt_length, 0));
}

std::vector<int64_t> generate(CausalLM& model, const std::vector<int64_t>& prompt_ids,
                              const GenerationOptions& options) {
  return generate(model, prompt_ids, options, 1).front();
}

std::vector<std::vector<int64_t>> generate(CausalLM& model, const std::vector<int64_t>& prompt_ids,
                                           const GenerationOptions& options, int64_t sequences) {
  check_generation_options(options);
  HPCTRAIN_CHECK(sequences >= 1 && (sequences == 1 || options.temperature > 0), "num_return_sequences: expected 1, "
                 "or more when sampling (temperature > 0), got {}", sequences);
  check_prompt(prompt_ids, model.vocab_size());
  check_generation_fits(model.config(), static_cast<int64_t>(prompt_ids.size()), options.max_new_tokens,
                        core::available_host_memory());
  SplitMix64 rng(options.seed);
  std::vector<std::vector<int64_t>> drawn;
  for (int64_t i = 0; i < sequences; ++i) drawn.push_back(continue_prompt(model, prompt_ids, options, rng));
  return drawn;
}
// Note [Safe sampling]
// transformers divides the float32 scores by the temperature: with T = 1e-40 (a float32 denormal) they overflow to
// +-inf, softmax gives NaN and a sampler that skips NaN returned token 0, an id the distribution never chose. Here
// the scores are shifted by their maximum and scaled in float64: (s - max) / T <= 0, so exp never overflows and
// the most likely token keeps probability 1 in the limit T -> 0 (top-k and top-p see the same order of tokens,
// since the shift and a positive scale keep it). Logits holding NaN or +Inf are refused (there is no distribution
// to draw from), and draw_token refuses a distribution without a drawable token.
int64_t next_token(const at::Tensor& logits, const GenerationOptions& options, SplitMix64& rng) {
  const at::Tensor scores = logits.to(at::kFloat);  // transformers' generate works on float32 scores
  const at::Tensor bad = at::isnan(scores).logical_or_(scores == std::numeric_limits<float>::infinity());
  HPCTRAIN_CHECK(!bad.any().item<bool>(), "generate: the model's logits for the next token hold {} NaN or +Inf "
                 "value(s) (first at token id {}): the weights or the computation are not finite",
                 bad.sum().item<int64_t>(), bad.nonzero().min().item<int64_t>());
  HPCTRAIN_CHECK(scores.max().item<float>() > -std::numeric_limits<float>::infinity(),
                 "generate: every logit for the next token is -Inf: no token can follow");
  if (options.temperature == 0) return scores.argmax().item<int64_t>();
  const at::Tensor scaled = (scores.to(at::kDouble) - scores.max().to(at::kDouble)) / options.temperature;
  const at::Tensor warped = top_p_filtered(top_k_filtered(scaled, options.top_k), options.top_p);
  return draw_token(at::softmax(warped, -1), rng);
}

at::Tensor top_k_filtered(const at::Tensor& logits, int64_t top_k) {
  if (top_k <= 0) return logits;
  const int64_t k = std::min(top_k, logits.size(-1));
  const at::Tensor kth = std::get<0>(at::topk(logits, k, -1)).narrow(-1, k - 1, 1);
  return logits.masked_fill(logits < kth, -std::numeric_limits<float>::infinity());
}

at::Tensor top_p_filtered(const at::Tensor& logits, double top_p) {
  if (top_p >= 1) return logits;
  // As TopPLogitsWarper: ascending order, drop the tokens whose cumulative probability stays <= 1 - top_p, never
  // the most likely one.
  const auto [sorted, order] = at::sort(logits, -1, /*descending=*/false);
  at::Tensor remove_sorted = at::softmax(sorted, -1).cumsum(-1) <= (1 - top_p);
  remove_sorted.narrow(-1, logits.size(-1) - 1, 1).fill_(false);
  const at::Tensor remove = remove_sorted.scatter(-1, order, remove_sorted);
  return logits.masked_fill(remove, -std::numeric_limits<float>::infinity());
}

std::vector<int64_t> eos_token_ids(const fs::path& model_dir) {
  const fs::path generation_config = model_dir / "generation_config.json";
  if (fs::exists(generation_config)) {
    if (auto ids = eos_ids_in(generation_config)) return *ids;
  }
  return eos_ids_in(model_dir / "config.json").value_or(std::vector<int64_t>{});
}

}  // namespace hpctrain::models
