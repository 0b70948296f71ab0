// A typed view of a Hugging Face `config.json`: DistilBERT, BERT, GPT-2, Llama, Qwen2, hpctrain's vision
// models, and a generic path for any other model_type. Absent keys take transformers' defaults; wrong types and
// impossible values throw Error naming the field, the expected type and the value found. The original
// JSON object is kept, so keys we do not model survive a save (we overwrite only the keys we own).
// Vision configs ("hpctrain-cnn", "hpctrain-mlp") are documented in docs/model-configs.md.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace hpctrain::io {

// Activation functions config.json may name (hidden_act / activation):
//   "gelu"                            -> gelu      (exact, erf-based: torch gelu(approximate="none"))
//   "gelu_new", "gelu_pytorch_tanh"   -> gelu_tanh (tanh approximation: torch gelu(approximate="tanh"))
//   "relu"                            -> relu
//   "silu", "swish"                   -> silu      (x * sigmoid(x): Llama, Qwen2)
// Anything else ("gelu_fast", "quick_gelu", ...) is an Error listing these.
enum class Activation { gelu, gelu_tanh, relu, silu };
[[nodiscard]] Activation parse_activation(std::string_view name, std::string_view field = "activation");

enum class ProblemType { unset, single_label_classification, multi_label_classification, regression };
[[nodiscard]] std::string_view problem_type_name(ProblemType type);  // "" for unset

// The most classes a config may name: far above any classification head in use (ImageNet-21k has 21,843), and
// low enough that `num_labels` from a hostile file cannot make us build billions of label names.
inline constexpr std::int64_t kMaxNumLabels = std::int64_t{1} << 20;

// Keys every transformers PretrainedConfig has (the ones hpctrain uses).
struct CommonConfig {
  std::string model_type;
  std::vector<std::string> architectures;  // e.g. {"DistilBertForSequenceClassification"}; empty if absent/null
  // Class names by id: id2label[i] is the label of class i; JSON keys "0".."N-1" (strings, as JSON needs).
  // Absent: num_labels (default 2) names LABEL_0, LABEL_1, ... as transformers does.
  std::vector<std::string> id2label{"LABEL_0", "LABEL_1"};
  // label -> id; absent: the inverse of id2label. Kept as written (hub configs are not always consistent).
  std::map<std::string, std::int64_t> label2id{{"LABEL_0", 0}, {"LABEL_1", 1}};
  ProblemType problem_type = ProblemType::unset;
  std::string dtype;                 // "float32" | "float16" | "bfloat16"; "" if absent (torch_dtype or dtype)
  std::string transformers_version;  // "" if absent

  [[nodiscard]] std::int64_t num_labels() const { return static_cast<std::int64_t>(id2label.size()); }
  // transformers' num_labels setter: when the count changes, labels become LABEL_0..LABEL_{n-1}.
  // Error outside [1, kMaxNumLabels].
  void set_num_labels(std::int64_t count);
  // Names the classes (id2label = names, label2id = inverse).
  void set_labels(std::vector<std::string> names);
};

// transformers DistilBertConfig.
struct DistilBertConfig {
  std::int64_t vocab_size = 30522;
  std::int64_t max_position_embeddings = 512;
  bool sinusoidal_pos_embds = false;
  std::int64_t n_layers = 6;
  std::int64_t n_heads = 12;
  std::int64_t dim = 768;
  std::int64_t hidden_dim = 3072;  // FFN inner size
  double dropout = 0.1;
  double attention_dropout = 0.1;
  std::string activation = "gelu";  // see Activation
  double initializer_range = 0.02;
  double qa_dropout = 0.1;
  double seq_classif_dropout = 0.2;
  std::optional<std::int64_t> pad_token_id = 0;  // null in JSON -> nullopt
  // Not a config key: HF's DistilBERT hard-codes LayerNorm(eps=1e-12).
  static constexpr double layer_norm_eps = 1e-12;

  [[nodiscard]] Activation activation_fn() const { return parse_activation(activation, "activation"); }
};

// transformers BertConfig.
struct BertConfig {
  std::int64_t vocab_size = 30522;
  std::int64_t hidden_size = 768;
  std::int64_t num_hidden_layers = 12;
  std::int64_t num_attention_heads = 12;
  std::int64_t intermediate_size = 3072;
  std::string hidden_act = "gelu";  // see Activation
  double hidden_dropout_prob = 0.1;
  double attention_probs_dropout_prob = 0.1;
  std::int64_t max_position_embeddings = 512;
  std::int64_t type_vocab_size = 2;
  double initializer_range = 0.02;
  double layer_norm_eps = 1e-12;
  std::optional<std::int64_t> pad_token_id = 0;
  std::string position_embedding_type = "absolute";  // the only kind hpctrain implements
  std::optional<double> classifier_dropout;          // null -> hidden_dropout_prob

  [[nodiscard]] Activation activation_fn() const { return parse_activation(hidden_act, "hidden_act"); }
  // The dropout before the classification head (BertForSequenceClassification's rule).
  [[nodiscard]] double effective_classifier_dropout() const { return classifier_dropout.value_or(hidden_dropout_prob); }
};

// model_type "hpctrain-cnn": conv blocks then an MLP head over images of
// in_channels x image_size x image_size (docs/model-configs.md).
struct CnnConfig {
  std::int64_t in_channels = 3;
  std::int64_t image_size = 32;
  std::vector<std::int64_t> conv_channels{32, 64};  // output channels of each conv block
  std::vector<std::int64_t> hidden{128};            // hidden widths of the head (may be empty)
  double dropout = 0.1;
};

// model_type "hpctrain-mlp": flattened in_channels * image_size^2 inputs, hidden layers, classifier.
struct MlpConfig {
  std::int64_t in_channels = 3;
  std::int64_t image_size = 32;
  std::vector<std::int64_t> hidden{128};
  double dropout = 0.1;
};

// transformers GPT2Config (GPT2LMHeadModel). Aliases transformers also reads (its attribute_map):
// hidden_size -> n_embd, max_position_embeddings -> n_positions, num_attention_heads -> n_head,
// num_hidden_layers -> n_layer.
struct Gpt2Config {
  std::int64_t vocab_size = 50257;
  std::int64_t n_positions = 1024;
  std::int64_t n_embd = 768;
  std::int64_t n_layer = 12;
  std::int64_t n_head = 12;
  std::optional<std::int64_t> n_inner;           // null -> 4 * n_embd
  std::string activation_function = "gelu_new";  // see Activation
  double resid_pdrop = 0.1;
  double embd_pdrop = 0.1;
  double attn_pdrop = 0.1;
  double layer_norm_epsilon = 1e-5;
  double initializer_range = 0.02;
  bool scale_attn_weights = true;
  bool scale_attn_by_inverse_layer_idx = false;  // true is refused (not implemented)
  bool reorder_and_upcast_attn = false;          // numerics only: hpctrain's attention softmax is fp32 already
  bool tie_word_embeddings = true;

  [[nodiscard]] std::int64_t inner_size() const { return n_inner.value_or(4 * n_embd); }
  [[nodiscard]] Activation activation_fn() const {
    return parse_activation(activation_function, "activation_function");
  }
};

// Rotary position embeddings of Llama and Qwen2. transformers 4.x writes "rope_theta" and "rope_scaling"
// ({"rope_type" or legacy "type", "factor", ...} or null); 5.x writes "rope_parameters" ({"rope_type",
// "rope_theta", ...}). Both are read as transformers 5.24 reads them, a non-empty rope_scaling winning over
// rope_parameters (Note [Rope settings] in src/io/causal_lm_config.cpp); a save writes the spelling read.
struct RopeConfig {
  double theta = 10000.0;
  std::string type = "default";  // "default", "linear" or "llama3" (others are refused)
  double factor = 1.0;           // linear, llama3
  double low_freq_factor = 1.0;  // llama3
  double high_freq_factor = 4.0;
  std::int64_t original_max_position_embeddings = 8192;  // llama3 (read: default max_position_embeddings)
  bool parameters_key = false;                           // read from "rope_parameters" (transformers 5.x)
};

// transformers LlamaConfig (LlamaForCausalLM).
struct LlamaConfig {
  std::int64_t vocab_size = 32000;
  std::int64_t hidden_size = 4096;
  std::int64_t intermediate_size = 11008;
  std::int64_t num_hidden_layers = 32;
  std::int64_t num_attention_heads = 32;
  std::optional<std::int64_t> num_key_value_heads;  // absent/null -> num_attention_heads (no GQA)
  std::optional<std::int64_t> head_dim;             // absent/null -> hidden_size / num_attention_heads
  std::string hidden_act = "silu";                  // see Activation
  std::int64_t max_position_embeddings = 2048;
  double initializer_range = 0.02;
  double rms_norm_eps = 1e-6;
  bool tie_word_embeddings = false;
  bool attention_bias = false;  // Llama: bias on q, k, v and o_proj
  bool mlp_bias = false;
  double attention_dropout = 0.0;
  std::optional<std::int64_t> pad_token_id;  // the embedding's padding_idx
  RopeConfig rope;

  [[nodiscard]] std::int64_t kv_heads() const { return num_key_value_heads.value_or(num_attention_heads); }
  [[nodiscard]] std::int64_t head_size() const { return head_dim.value_or(hidden_size / num_attention_heads); }
  [[nodiscard]] Activation activation_fn() const { return parse_activation(hidden_act, "hidden_act"); }
};

// transformers Qwen2Config (Qwen2ForCausalLM): Llama's layers with a bias on q, k and v (never on o_proj,
// never in the MLP; there is no attention_bias key) and its own defaults. Sliding-window attention
// (use_sliding_window true) is refused; sliding_window, max_window_layers and layer_types are kept as written.
struct Qwen2Config : LlamaConfig {
  Qwen2Config() {
    vocab_size = 151936;
    intermediate_size = 22016;
    num_key_value_heads = 32;
    max_position_embeddings = 32768;
  }
  bool use_sliding_window = false;
};

using ModelConfig = std::variant<std::monostate, DistilBertConfig, BertConfig, CnnConfig, MlpConfig, Gpt2Config,
                                 LlamaConfig, Qwen2Config>;

class HfConfig {
 public:
  HfConfig() = default;
  // A new config for one of the known models (model_type set accordingly).
  explicit HfConfig(ModelConfig model);

  // Parses a config.json object. `source` names it in errors (a path, or "config.json").
  [[nodiscard]] static HfConfig from_json(const nlohmann::json& object, const std::string& source = "config.json");
  // Reads `path`, a config.json file or a folder holding one.
  [[nodiscard]] static HfConfig load(const std::filesystem::path& path);

  // The original object with our keys overwritten. Validates first (Error as in from_json).
  [[nodiscard]] nlohmann::json to_json() const;
  // As transformers writes config.json: sorted keys, 2-space indent, ASCII escapes, trailing newline.
  [[nodiscard]] std::string to_json_string() const;
  // Writes to_json_string() to `path` (a file, or a folder -> folder/config.json), atomically.
  void save(const std::filesystem::path& path) const;
  // Re-checks the typed fields (after edits): types, ranges, divisibility, activation, model_type.
  void validate() const;

  [[nodiscard]] const std::string& model_type() const { return common.model_type; }
  // True for distilbert, bert, gpt2, llama, qwen2, hpctrain-cnn, hpctrain-mlp; false for the generic path.
  [[nodiscard]] bool is_known_model() const { return !std::holds_alternative<std::monostate>(model); }
  // The typed config; Error naming the actual model_type when it is another model.
  [[nodiscard]] const DistilBertConfig& distilbert() const;
  [[nodiscard]] const BertConfig& bert() const;
  [[nodiscard]] const CnnConfig& cnn() const;
  [[nodiscard]] const MlpConfig& mlp() const;
  [[nodiscard]] const Gpt2Config& gpt2() const;
  [[nodiscard]] const LlamaConfig& llama() const;
  [[nodiscard]] const Qwen2Config& qwen2() const;
  // llama() or qwen2(): the settings LlamaForCausalLM builds from.
  [[nodiscard]] const LlamaConfig& llama_family() const;
  // The object as read (unknown keys included); empty object for a config built in code.
  [[nodiscard]] const nlohmann::json& raw() const { return raw_; }
  // Sets a key hpctrain does not model (kept in raw(), written by to_json): "bos_token_id", "eos_token_id".
  // Error when `key` is one of the typed fields' keys (set those through the typed config).
  void set_extra(const std::string& key, nlohmann::json value);
  // What the config was read from (a path, or "config.json" for one built in code), for messages.
  [[nodiscard]] const std::string& source() const { return source_; }

  CommonConfig common;
  ModelConfig model;

 private:
  nlohmann::json raw_ = nlohmann::json::object();
  std::string source_ = "config.json";
};

}  // namespace hpctrain::io
