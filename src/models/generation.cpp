// Greedy and sampled generation over a KV cache (generation.hpp).
#include "hpctrain/models/generation.hpp"

#include "hpctrain/core/error.hpp"

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

// Inverse-CDF draw from `probs` [vocab] (summing to about 1; zeros are never drawn).
int64_t draw_token(const at::Tensor& probs, SplitMix64& rng) {
  const at::Tensor p = probs.to(at::kCPU, at::kDouble).contiguous();
  const double* values = p.data_ptr<double>();
  const int64_t vocab = p.numel();
  double total = 0;
  for (int64_t i = 0; i < vocab; ++i) total += values[i];
  const double target = uniform01(rng) * total;
  double cumulative = 0;
  int64_t last_drawable = 0;
  for (int64_t i = 0; i < vocab; ++i) {
    if (!(values[i] > 0)) continue;
    last_drawable = i;
    cumulative += values[i];
    if (cumulative > target) return i;
  }
  return last_drawable;  // rounding left the target at the very end
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

}  // namespace

void check_generation_options(const GenerationOptions& o) {
  HPCTRAIN_CHECK(o.max_new_tokens >= 1, "max_new_tokens: expected at least 1 token, got {}", o.max_new_tokens);
  HPCTRAIN_CHECK(std::isfinite(o.temperature) && o.temperature >= 0,
                 "temperature: expected a number >= 0 (0 = greedy), got {}", o.temperature);
  HPCTRAIN_CHECK(o.top_k >= 0, "top_k: expected a number of tokens >= 0 (0 = all), got {}", o.top_k);
  HPCTRAIN_CHECK(o.top_p > 0 && o.top_p <= 1, "top_p: expected a probability in (0, 1] (1 = all), got {}", o.top_p);
}

std::vector<int64_t> generate(CausalLM& model, const std::vector<int64_t>& prompt_ids,
                              const GenerationOptions& options) {
  check_generation_options(options);
  check_prompt(prompt_ids, model.vocab_size());
  at::NoGradGuard no_grad;
  const at::Device device = device_of(model);
  KvCache cache = model.new_kv_cache(static_cast<int64_t>(prompt_ids.size()) + options.max_new_tokens);
  SplitMix64 rng(options.seed);
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

int64_t next_token(const at::Tensor& logits, const GenerationOptions& options, SplitMix64& rng) {
  const at::Tensor scores = logits.to(at::kFloat);  // transformers' generate works on float32 scores
  if (options.temperature == 0) return scores.argmax().item<int64_t>();
  const at::Tensor warped = top_p_filtered(top_k_filtered(scores / options.temperature, options.top_k), options.top_p);
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
