// Private to src/io: config.json keys of the causal language models (GPT-2, Llama, Qwen2) — read with
// transformers' defaults, validated with errors naming the file and field, written back for save.
#pragma once

#include "hpctrain/io/hf_config.hpp"
#include "io/config_fields.hpp"

#include <nlohmann/json.hpp>

#include <string>

namespace hpctrain::io::detail {

[[nodiscard]] Gpt2Config read_gpt2(const ConfigFields& fields);
[[nodiscard]] LlamaConfig read_llama(const ConfigFields& fields);
[[nodiscard]] Qwen2Config read_qwen2(const ConfigFields& fields);

// Error naming `source` and the field on an impossible value or an unsupported feature.
void validate_gpt2(const Gpt2Config& config, const std::string& source);
void validate_llama(const LlamaConfig& config, const std::string& source);

// Our keys into `out` (the original object: other keys stay as written).
void write_gpt2(const Gpt2Config& config, nlohmann::json& out);
void write_llama(const LlamaConfig& config, nlohmann::json& out);
void write_qwen2(const Qwen2Config& config, nlohmann::json& out);

}  // namespace hpctrain::io::detail
