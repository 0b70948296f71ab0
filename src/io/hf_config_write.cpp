// HfConfig::to_json / save: the original object with our keys overwritten, written as transformers does.
#include "hpctrain/core/error.hpp"
#include "hpctrain/io/hf_config.hpp"
#include "hpctrain/io/atomic_write.hpp"
#include "io/causal_lm_config.hpp"
#include "io/file_util.hpp"

namespace hpctrain::io {
namespace {

using nlohmann::json;

json optional_value(const std::optional<std::int64_t>& value) { return value ? json(*value) : json(nullptr); }
json optional_value(const std::optional<double>& value) { return value ? json(*value) : json(nullptr); }

void write_common(const CommonConfig& common, json& out) {
  out["model_type"] = common.model_type;
  if (!common.architectures.empty()) {
    out["architectures"] = common.architectures;
  } else if (out.contains("architectures")) {
    out["architectures"] = nullptr;
  }
  // A causal LM has no labels: transformers writes no id2label for one (the defaults LABEL_0, LABEL_1 are left
  // out), so neither do we unless the file had them or they were set.
  const bool causal = common.model_type == "gpt2" || common.model_type == "llama" || common.model_type == "qwen2";
  const bool default_labels = common.id2label == CommonConfig{}.id2label && common.label2id == CommonConfig{}.label2id;
  if (!(causal && default_labels && !out.contains("id2label"))) {
    json id2label = json::object();  // JSON keys are strings: {"0": "NEGATIVE", ...}
    for (std::size_t i = 0; i < common.id2label.size(); ++i) id2label[std::to_string(i)] = common.id2label[i];
    out["id2label"] = std::move(id2label);
    out["label2id"] = common.label2id;
  }
  // transformers derives num_labels from id2label and does not write it; keep a hand-written one in step.
  if (out.contains("num_labels")) out["num_labels"] = common.num_labels();
  if (common.problem_type != ProblemType::unset) {
    out["problem_type"] = problem_type_name(common.problem_type);
  } else if (out.contains("problem_type")) {
    out["problem_type"] = nullptr;
  }
  // Keep the spelling the file used; new files get "torch_dtype", which old and new transformers read.
  const json dtype = common.dtype.empty() ? json(nullptr) : json(common.dtype);
  const bool has_new = out.contains("dtype");
  const bool has_old = out.contains("torch_dtype");
  if (has_new) out["dtype"] = dtype;
  if (has_old || (!has_new && !common.dtype.empty())) out["torch_dtype"] = dtype;
  if (!common.transformers_version.empty()) out["transformers_version"] = common.transformers_version;
}

void write_model(const std::monostate&, json&) {}

void write_model(const DistilBertConfig& c, json& out) {
  out["vocab_size"] = c.vocab_size;
  out["max_position_embeddings"] = c.max_position_embeddings;
  out["sinusoidal_pos_embds"] = c.sinusoidal_pos_embds;
  out["n_layers"] = c.n_layers;
  out["n_heads"] = c.n_heads;
  out["dim"] = c.dim;
  out["hidden_dim"] = c.hidden_dim;
  out["dropout"] = c.dropout;
  out["attention_dropout"] = c.attention_dropout;
  out["activation"] = c.activation;
  out["initializer_range"] = c.initializer_range;
  out["qa_dropout"] = c.qa_dropout;
  out["seq_classif_dropout"] = c.seq_classif_dropout;
  out["pad_token_id"] = optional_value(c.pad_token_id);
  // Aliases transformers also reads (DistilBertConfig.attribute_map): keep any that are present in step.
  if (out.contains("hidden_size")) out["hidden_size"] = c.dim;
  if (out.contains("num_attention_heads")) out["num_attention_heads"] = c.n_heads;
  if (out.contains("num_hidden_layers")) out["num_hidden_layers"] = c.n_layers;
}

void write_model(const BertConfig& c, json& out) {
  out["vocab_size"] = c.vocab_size;
  out["hidden_size"] = c.hidden_size;
  out["num_hidden_layers"] = c.num_hidden_layers;
  out["num_attention_heads"] = c.num_attention_heads;
  out["intermediate_size"] = c.intermediate_size;
  out["hidden_act"] = c.hidden_act;
  out["hidden_dropout_prob"] = c.hidden_dropout_prob;
  out["attention_probs_dropout_prob"] = c.attention_probs_dropout_prob;
  out["max_position_embeddings"] = c.max_position_embeddings;
  out["type_vocab_size"] = c.type_vocab_size;
  out["initializer_range"] = c.initializer_range;
  out["layer_norm_eps"] = c.layer_norm_eps;
  out["pad_token_id"] = optional_value(c.pad_token_id);
  out["position_embedding_type"] = c.position_embedding_type;
  out["classifier_dropout"] = optional_value(c.classifier_dropout);
}

// Our own model types always carry num_labels, so the file reads well on its own.
void write_model(const CnnConfig& c, json& out) {
  out["in_channels"] = c.in_channels;
  out["image_size"] = c.image_size;
  out["conv_channels"] = c.conv_channels;
  out["hidden"] = c.hidden;
  out["dropout"] = c.dropout;
  out["num_labels"] = out["id2label"].size();
}

void write_model(const MlpConfig& c, json& out) {
  out["in_channels"] = c.in_channels;
  out["image_size"] = c.image_size;
  out["hidden"] = c.hidden;
  out["dropout"] = c.dropout;
  out["num_labels"] = out["id2label"].size();
}

void write_model(const Gpt2Config& c, json& out) { detail::write_gpt2(c, out); }
void write_model(const LlamaConfig& c, json& out) { detail::write_llama(c, out); }
void write_model(const Qwen2Config& c, json& out) { detail::write_qwen2(c, out); }

}  // namespace

json HfConfig::to_json() const {
  validate();
  json out = raw_.is_object() ? raw_ : json::object();
  write_common(common, out);
  std::visit([&](const auto& typed) { write_model(typed, out); }, model);
  return out;
}

void HfConfig::set_extra(const std::string& key, json value) {
  json typed = json::object();
  write_common(common, typed);
  std::visit([&](const auto& model_config) { write_model(model_config, typed); }, model);
  HPCTRAIN_CHECK(!typed.contains(key), "config.json key '{}' is a typed field of model_type '{}': set it through the "
                 "typed config", key, model_type());
  if (!raw_.is_object()) raw_ = json::object();
  raw_[key] = std::move(value);
}

std::string HfConfig::to_json_string() const {
  // json.dumps(config, indent=2, sort_keys=True) + "\n": nlohmann's json keeps keys sorted.
  return to_json().dump(2, ' ', true) + "\n";
}

void HfConfig::save(const std::filesystem::path& path) const {
  const std::filesystem::path file = std::filesystem::is_directory(path) ? path / "config.json" : path;
  write_file_atomically(file, to_json_string());
}

}  // namespace hpctrain::io
