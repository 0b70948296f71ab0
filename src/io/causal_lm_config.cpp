// config.json of GPT-2, Llama and Qwen2 (causal_lm_config.hpp): transformers' defaults, aliases and the two
// spellings of the rotary settings.
#include "io/causal_lm_config.hpp"

#include "hpctrain/core/error.hpp"

#include <string_view>
#include <vector>

namespace hpctrain::io::detail {
namespace {

using nlohmann::json;

json optional_value(const std::optional<std::int64_t>& value) { return value ? json(*value) : json(nullptr); }

// `key`, or its alias (transformers' attribute_map) when only that is written; both must agree.
std::int64_t aliased_integer(const ConfigFields& f, const char* key, const char* alias, std::int64_t fallback) {
  const std::int64_t value = f.integer(key, fallback);
  if (!f.has(alias)) return value;
  const std::int64_t aliased = f.integer(alias, value);
  HPCTRAIN_CHECK(!f.has(key) || aliased == value, "{}: '{}' is {} but its alias '{}' is {}; expected one value",
                 f.source(), key, value, alias, aliased);
  return aliased;
}

// Note [Rope settings]
// As transformers 5.24 reads them (PreTrainedConfig.convert_rope_params_to_dict and standardize_rope_params):
// the settings come from `rope_scaling or rope_parameters` — a non-empty "rope_scaling" object wins over
// "rope_parameters" when a file has both (it used to be ignored, so the rotary frequencies and the loss
// differed) — with rope_theta from that object, else the top-level "rope_theta", else 10000; "type" is the legacy
// spelling of "rope_type"; linear needs "factor", llama3 "factor", "low_freq_factor" and "high_freq_factor" (refused
// naming the field when missing, as transformers' KeyError), and its "original_max_position_embeddings" defaults
// to max_position_embeddings. An unknown rope_type is refused naming the field (validate_rope). Golden:
// tests/models/golden/causal_lm_reference.py's tiny-llama-rope-both case; causal_lm_config_test.cpp.
RopeConfig read_rope(const ConfigFields& f, std::int64_t max_position_embeddings) {
  RopeConfig rope;
  rope.theta = f.number("rope_theta", rope.theta);
  rope.original_max_position_embeddings = max_position_embeddings;
  const auto non_empty = [&](const char* key) {
    return f.has(key) && !(f.object().at(key).is_object() && f.object().at(key).empty());
  };
  const bool scaling = non_empty("rope_scaling");
  rope.parameters_key = !scaling && f.has("rope_parameters");
  const char* key = scaling ? "rope_scaling" : "rope_parameters";
  if (!f.has(key)) return rope;
  const json& object = f.object().at(key);
  if (!object.is_object()) f.wrong_type(key, "an object {\"rope_type\": ..., ...} or null");
  const ConfigFields sub(object, f.source() + ": " + key);
  rope.theta = sub.number("rope_theta", rope.theta);
  rope.type = sub.string("rope_type", sub.string("type", rope.type));  // "type": transformers' legacy spelling
  std::vector<const char*> required;
  if (rope.type == "linear") required = {"factor"};
  if (rope.type == "llama3") required = {"factor", "low_freq_factor", "high_freq_factor"};
  for (const char* field : required)
    HPCTRAIN_CHECK(sub.has(field), "{}: {}: rope_type \"{}\" needs '{}' (transformers refuses the file without it)",
                   f.source(), key, rope.type, field);
  rope.factor = sub.number("factor", rope.factor);
  rope.low_freq_factor = sub.number("low_freq_factor", rope.low_freq_factor);
  rope.high_freq_factor = sub.number("high_freq_factor", rope.high_freq_factor);
  rope.original_max_position_embeddings =
      sub.integer("original_max_position_embeddings", rope.original_max_position_embeddings);
  return rope;
}

void validate_rope(const RopeConfig& r, const std::string& source) {
  const char* key = r.parameters_key ? "rope_parameters" : "rope_scaling";
  HPCTRAIN_CHECK(r.type == "default" || r.type == "linear" || r.type == "llama3",
                 "{}: {} rope_type \"{}\" is not "
                 "supported; expected \"default\", \"linear\" or \"llama3\" (field '{}.rope_type')",
                 source, key, r.type, key);
  HPCTRAIN_CHECK(r.theta > 0.0, "{}: rope_theta must be positive, got {}", source, r.theta);
  if (r.type == "default") return;
  HPCTRAIN_CHECK(r.factor > 0.0, "{}: {} factor must be positive, got {}", source, key, r.factor);
  if (r.type != "llama3") return;
  HPCTRAIN_CHECK(r.low_freq_factor > 0.0 && r.high_freq_factor > r.low_freq_factor,
                 "{}: {} llama3 needs 0 < "
                 "low_freq_factor < high_freq_factor, got {} and {}",
                 source, key, r.low_freq_factor, r.high_freq_factor);
  HPCTRAIN_CHECK(r.original_max_position_embeddings > 0,
                 "{}: {} original_max_position_embeddings must be positive, "
                 "got {}",
                 source, key, r.original_max_position_embeddings);
}

void write_rope(const RopeConfig& r, json& out) {
  json* object = nullptr;
  if (r.parameters_key) {
    object = &out["rope_parameters"];
    if (!object->is_object()) *object = json::object();
    (*object)["rope_theta"] = r.theta;
  } else {
    out["rope_theta"] = r.theta;
    if (r.type == "default") {
      if (out.contains("rope_scaling")) out["rope_scaling"] = nullptr;
      return;
    }
    object = &out["rope_scaling"];
    if (!object->is_object()) *object = json::object();
    if (object->contains("type")) (*object)["type"] = r.type;
  }
  (*object)["rope_type"] = r.type;
  if (r.type != "default") (*object)["factor"] = r.factor;
  if (r.type != "llama3") return;
  (*object)["low_freq_factor"] = r.low_freq_factor;
  (*object)["high_freq_factor"] = r.high_freq_factor;
  (*object)["original_max_position_embeddings"] = r.original_max_position_embeddings;
}

void positive(const std::string& source, const char* field, std::int64_t value) {
  HPCTRAIN_CHECK(value > 0, "{}: {} must be positive, got {}", source, field, value);
}

void probability(const std::string& source, const char* field, double value) {
  HPCTRAIN_CHECK(value >= 0.0 && value <= 1.0, "{}: {} is a dropout probability, expected 0..1, got {}", source, field,
                 value);
}

// The keys Llama and Qwen2 share.
void read_llama_keys(const ConfigFields& f, LlamaConfig& c) {
  c.vocab_size = f.integer("vocab_size", c.vocab_size);
  c.hidden_size = f.integer("hidden_size", c.hidden_size);
  c.intermediate_size = f.integer("intermediate_size", c.intermediate_size);
  c.num_hidden_layers = f.integer("num_hidden_layers", c.num_hidden_layers);
  c.num_attention_heads = f.integer("num_attention_heads", c.num_attention_heads);
  c.num_key_value_heads = f.optional_integer("num_key_value_heads", c.num_key_value_heads);
  c.head_dim = f.optional_integer("head_dim", c.head_dim);
  c.hidden_act = f.string("hidden_act", c.hidden_act);
  c.max_position_embeddings = f.integer("max_position_embeddings", c.max_position_embeddings);
  c.initializer_range = f.number("initializer_range", c.initializer_range);
  c.rms_norm_eps = f.number("rms_norm_eps", c.rms_norm_eps);
  c.tie_word_embeddings = f.boolean("tie_word_embeddings", c.tie_word_embeddings);
  c.attention_dropout = f.number("attention_dropout", c.attention_dropout);
  c.pad_token_id = f.optional_integer("pad_token_id", c.pad_token_id);
  c.rope = read_rope(f, c.max_position_embeddings);
}

}  // namespace

Gpt2Config read_gpt2(const ConfigFields& f) {
  Gpt2Config c;
  c.vocab_size = f.integer("vocab_size", c.vocab_size);
  c.n_positions = aliased_integer(f, "n_positions", "max_position_embeddings", c.n_positions);
  c.n_embd = aliased_integer(f, "n_embd", "hidden_size", c.n_embd);
  c.n_layer = aliased_integer(f, "n_layer", "num_hidden_layers", c.n_layer);
  c.n_head = aliased_integer(f, "n_head", "num_attention_heads", c.n_head);
  c.n_inner = f.optional_integer("n_inner", c.n_inner);
  c.activation_function = f.string("activation_function", c.activation_function);
  c.resid_pdrop = f.number("resid_pdrop", c.resid_pdrop);
  c.embd_pdrop = f.number("embd_pdrop", c.embd_pdrop);
  c.attn_pdrop = f.number("attn_pdrop", c.attn_pdrop);
  c.layer_norm_epsilon = f.number("layer_norm_epsilon", c.layer_norm_epsilon);
  c.initializer_range = f.number("initializer_range", c.initializer_range);
  c.scale_attn_weights = f.boolean("scale_attn_weights", c.scale_attn_weights);
  c.scale_attn_by_inverse_layer_idx = f.boolean("scale_attn_by_inverse_layer_idx", c.scale_attn_by_inverse_layer_idx);
  c.reorder_and_upcast_attn = f.boolean("reorder_and_upcast_attn", c.reorder_and_upcast_attn);
  c.tie_word_embeddings = f.boolean("tie_word_embeddings", c.tie_word_embeddings);
  return c;
}

LlamaConfig read_llama(const ConfigFields& f) {
  LlamaConfig c;
  read_llama_keys(f, c);
  c.attention_bias = f.boolean("attention_bias", c.attention_bias);
  c.mlp_bias = f.boolean("mlp_bias", c.mlp_bias);
  return c;
}

Qwen2Config read_qwen2(const ConfigFields& f) {
  Qwen2Config c;
  read_llama_keys(f, c);
  c.attention_bias = true;  // Qwen2Attention: q_proj, k_proj, v_proj with bias=True, o_proj without
  c.use_sliding_window = f.boolean("use_sliding_window", c.use_sliding_window);
  HPCTRAIN_CHECK(!c.use_sliding_window,
                 "{}: use_sliding_window true is not supported (hpctrain's Qwen2 attends to "
                 "every earlier token); expected false",
                 f.source());
  return c;
}

void validate_gpt2(const Gpt2Config& c, const std::string& source) {
  positive(source, "vocab_size", c.vocab_size);
  positive(source, "n_positions", c.n_positions);
  positive(source, "n_embd", c.n_embd);
  positive(source, "n_layer", c.n_layer);
  positive(source, "n_head", c.n_head);
  positive(source, "n_inner", c.inner_size());
  HPCTRAIN_CHECK(c.n_embd % c.n_head == 0, "{}: n_embd ({}) must be divisible by n_head ({})", source, c.n_embd,
                 c.n_head);
  probability(source, "resid_pdrop", c.resid_pdrop);
  probability(source, "embd_pdrop", c.embd_pdrop);
  probability(source, "attn_pdrop", c.attn_pdrop);
  HPCTRAIN_CHECK(c.layer_norm_epsilon > 0.0, "{}: layer_norm_epsilon must be positive, got {}", source,
                 c.layer_norm_epsilon);
  HPCTRAIN_CHECK(!c.scale_attn_by_inverse_layer_idx,
                 "{}: scale_attn_by_inverse_layer_idx true is not supported; "
                 "expected false",
                 source);
  (void)c.activation_fn();
}

void validate_llama(const LlamaConfig& c, const std::string& source) {
  positive(source, "vocab_size", c.vocab_size);
  positive(source, "hidden_size", c.hidden_size);
  positive(source, "intermediate_size", c.intermediate_size);
  positive(source, "num_hidden_layers", c.num_hidden_layers);
  positive(source, "num_attention_heads", c.num_attention_heads);
  positive(source, "num_key_value_heads", c.kv_heads());
  positive(source, "max_position_embeddings", c.max_position_embeddings);
  HPCTRAIN_CHECK(c.head_dim || c.hidden_size % c.num_attention_heads == 0,
                 "{}: hidden_size ({}) must be divisible "
                 "by num_attention_heads ({}) when head_dim is not given",
                 source, c.hidden_size, c.num_attention_heads);
  positive(source, "head_dim", c.head_size());
  HPCTRAIN_CHECK(c.head_size() % 2 == 0, "{}: head_dim {} must be even (rotary embeddings rotate pairs)", source,
                 c.head_size());
  HPCTRAIN_CHECK(c.num_attention_heads % c.kv_heads() == 0,
                 "{}: num_attention_heads ({}) must be a multiple of "
                 "num_key_value_heads ({}): each key/value head serves a group of query heads",
                 source, c.num_attention_heads, c.kv_heads());
  HPCTRAIN_CHECK(c.rms_norm_eps > 0.0, "{}: rms_norm_eps must be positive, got {}", source, c.rms_norm_eps);
  probability(source, "attention_dropout", c.attention_dropout);
  HPCTRAIN_CHECK(!c.pad_token_id || (*c.pad_token_id >= 0 && *c.pad_token_id < c.vocab_size),
                 "{}: pad_token_id {} "
                 "is outside the vocabulary [0, {})",
                 source, c.pad_token_id.value_or(0), c.vocab_size);
  validate_rope(c.rope, source);
  (void)c.activation_fn();
}

void write_gpt2(const Gpt2Config& c, json& out) {
  out["vocab_size"] = c.vocab_size;
  out["n_positions"] = c.n_positions;
  out["n_embd"] = c.n_embd;
  out["n_layer"] = c.n_layer;
  out["n_head"] = c.n_head;
  out["n_inner"] = optional_value(c.n_inner);
  out["activation_function"] = c.activation_function;
  out["resid_pdrop"] = c.resid_pdrop;
  out["embd_pdrop"] = c.embd_pdrop;
  out["attn_pdrop"] = c.attn_pdrop;
  out["layer_norm_epsilon"] = c.layer_norm_epsilon;
  out["initializer_range"] = c.initializer_range;
  out["scale_attn_weights"] = c.scale_attn_weights;
  out["scale_attn_by_inverse_layer_idx"] = c.scale_attn_by_inverse_layer_idx;
  out["reorder_and_upcast_attn"] = c.reorder_and_upcast_attn;
  out["tie_word_embeddings"] = c.tie_word_embeddings;
  for (const auto& [alias, value] : {std::pair{"max_position_embeddings", c.n_positions},
                                     {"hidden_size", c.n_embd},
                                     {"num_hidden_layers", c.n_layer},
                                     {"num_attention_heads", c.n_head}}) {
    if (out.contains(alias)) out[alias] = value;  // keep aliases that are present in step
  }
}

namespace {

void write_llama_keys(const LlamaConfig& c, json& out) {
  out["vocab_size"] = c.vocab_size;
  out["hidden_size"] = c.hidden_size;
  out["intermediate_size"] = c.intermediate_size;
  out["num_hidden_layers"] = c.num_hidden_layers;
  out["num_attention_heads"] = c.num_attention_heads;
  out["num_key_value_heads"] = c.kv_heads();
  if (c.head_dim || out.contains("head_dim")) out["head_dim"] = c.head_size();
  out["hidden_act"] = c.hidden_act;
  out["max_position_embeddings"] = c.max_position_embeddings;
  out["initializer_range"] = c.initializer_range;
  out["rms_norm_eps"] = c.rms_norm_eps;
  out["tie_word_embeddings"] = c.tie_word_embeddings;
  out["attention_dropout"] = c.attention_dropout;
  out["pad_token_id"] = optional_value(c.pad_token_id);
  write_rope(c.rope, out);
}

}  // namespace

void write_llama(const LlamaConfig& c, json& out) {
  write_llama_keys(c, out);
  out["attention_bias"] = c.attention_bias;
  out["mlp_bias"] = c.mlp_bias;
}

void write_qwen2(const Qwen2Config& c, json& out) {
  write_llama_keys(c, out);  // Qwen2Config has no attention_bias / mlp_bias keys
  out["use_sliding_window"] = c.use_sliding_window;
}

}  // namespace hpctrain::io::detail
