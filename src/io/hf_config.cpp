// HfConfig: read config.json into typed structs with transformers' defaults, and validate them.
#include "hpctrain/io/hf_config.hpp"

#include "hpctrain/core/error.hpp"
#include "io/causal_lm_config.hpp"
#include "io/config_fields.hpp"
#include "io/file_util.hpp"

#include <algorithm>
#include <cctype>

namespace hpctrain::io {
namespace {

using detail::ConfigFields;
using nlohmann::json;

constexpr const char* kDTypes[] = {"float32", "float16", "bfloat16"};

// ---- common keys ----

// "0", "17": canonical non-negative decimal (no sign, no spaces, no leading zeros).
std::optional<std::int64_t> parse_label_id(const std::string& key) {
  if (key.empty() || key.size() > 18 || (key.size() > 1 && key[0] == '0')) return std::nullopt;
  if (!std::all_of(key.begin(), key.end(), [](unsigned char c) { return std::isdigit(c) != 0; })) return std::nullopt;
  return std::stoll(key);
}

std::vector<std::string> read_id2label(const ConfigFields& fields) {
  const json& object = fields.object()["id2label"];
  if (!object.is_object()) fields.wrong_type("id2label", "an object {\"0\": \"label\", ...}");
  std::vector<std::string> labels(object.size());
  std::vector<bool> seen(object.size(), false);
  for (const auto& [key, name] : object.items()) {
    const auto id = parse_label_id(key);
    HPCTRAIN_CHECK(id.has_value() && *id < static_cast<std::int64_t>(labels.size()) && !seen[*id],
                   "{}: id2label key \"{}\" is not a class id; expected the keys \"0\"..\"{}\" (one per class)",
                   fields.source(), key, labels.size() - 1);
    HPCTRAIN_CHECK(name.is_string(), "{}: id2label[\"{}\"] must be a string, got {}", fields.source(), key,
                   detail::describe_json(name));
    labels[*id] = name.get<std::string>();
    seen[*id] = true;
  }
  return labels;
}

std::map<std::string, std::int64_t> read_label2id(const ConfigFields& fields) {
  const json& object = fields.object()["label2id"];
  if (!object.is_object()) fields.wrong_type("label2id", "an object {\"label\": 0, ...}");
  std::map<std::string, std::int64_t> label2id;
  for (const auto& [name, id] : object.items()) {
    HPCTRAIN_CHECK(id.is_number_integer(), "{}: label2id[\"{}\"] must be an integer class id, got {}",
                   fields.source(), name, detail::describe_json(id));
    label2id.emplace(name, id.get<std::int64_t>());
  }
  return label2id;
}

ProblemType read_problem_type(const ConfigFields& fields) {
  const std::string name = fields.optional_string("problem_type", "");
  if (name.empty() && !fields.has("problem_type")) return ProblemType::unset;
  for (const ProblemType type : {ProblemType::single_label_classification, ProblemType::multi_label_classification,
                                 ProblemType::regression}) {
    if (problem_type_name(type) == name) return type;
  }
  fail("{}: problem_type \"{}\" is not supported; expected null, \"single_label_classification\", "
       "\"multi_label_classification\" or \"regression\"", fields.source(), name);
}

CommonConfig read_common(const ConfigFields& fields) {
  CommonConfig common;
  HPCTRAIN_CHECK(fields.has("model_type"), "{}: no 'model_type'; expected e.g. \"distilbert\" or \"bert\". Hint: "
                 "hpctrain picks the model from it, as transformers' AutoConfig does", fields.source());
  common.model_type = fields.string("model_type", "");
  common.architectures = fields.string_list("architectures");
  const std::optional<std::int64_t> num_labels = fields.optional_integer("num_labels", std::nullopt);
  if (fields.has("id2label")) {
    common.set_labels(read_id2label(fields));
    HPCTRAIN_CHECK(!num_labels || *num_labels == common.num_labels(), "{}: num_labels is {} but id2label names {} "
                   "classes; expected them to agree. Hint: drop num_labels or fix id2label", fields.source(),
                   num_labels.value_or(0), common.num_labels());
  } else {
    HPCTRAIN_CHECK(num_labels.value_or(2) >= 1 && num_labels.value_or(2) <= kMaxNumLabels,
                   "{}: num_labels must be at least 1 and at most {}, got {}", fields.source(), kMaxNumLabels,
                   num_labels.value_or(2));
    common.set_num_labels(num_labels.value_or(2));
  }
  if (fields.has("label2id")) common.label2id = read_label2id(fields);
  common.problem_type = read_problem_type(fields);
  // transformers >= 4.56 writes "dtype"; older ones "torch_dtype".
  common.dtype = fields.optional_string("dtype", fields.optional_string("torch_dtype", ""));
  common.transformers_version = fields.optional_string("transformers_version", "");
  return common;
}

// ---- model keys ----

// DistilBertConfig.attribute_map: transformers accepts these generic names as aliases.
struct Alias {
  const char* alias;
  const char* key;
};
constexpr Alias kDistilBertAliases[] = {{"hidden_size", "dim"}, {"num_attention_heads", "n_heads"},
                                        {"num_hidden_layers", "n_layers"}};

std::int64_t distilbert_integer(const ConfigFields& fields, const char* key, std::int64_t fallback) {
  std::int64_t value = fields.integer(key, fallback);
  for (const Alias& alias : kDistilBertAliases) {
    if (std::string_view(alias.key) != key || !fields.has(alias.alias)) continue;
    const std::int64_t aliased = fields.integer(alias.alias, value);
    HPCTRAIN_CHECK(!fields.has(key) || aliased == value, "{}: '{}' is {} but its alias '{}' is {}; expected one "
                   "value", fields.source(), key, value, alias.alias, aliased);
    value = aliased;
  }
  return value;
}

DistilBertConfig read_distilbert(const ConfigFields& f) {
  DistilBertConfig c;
  c.vocab_size = f.integer("vocab_size", c.vocab_size);
  c.max_position_embeddings = f.integer("max_position_embeddings", c.max_position_embeddings);
  c.sinusoidal_pos_embds = f.boolean("sinusoidal_pos_embds", c.sinusoidal_pos_embds);
  c.n_layers = distilbert_integer(f, "n_layers", c.n_layers);
  c.n_heads = distilbert_integer(f, "n_heads", c.n_heads);
  c.dim = distilbert_integer(f, "dim", c.dim);
  c.hidden_dim = f.integer("hidden_dim", c.hidden_dim);
  c.dropout = f.number("dropout", c.dropout);
  c.attention_dropout = f.number("attention_dropout", c.attention_dropout);
  c.activation = f.string("activation", c.activation);
  c.initializer_range = f.number("initializer_range", c.initializer_range);
  c.qa_dropout = f.number("qa_dropout", c.qa_dropout);
  c.seq_classif_dropout = f.number("seq_classif_dropout", c.seq_classif_dropout);
  c.pad_token_id = f.optional_integer("pad_token_id", c.pad_token_id);
  return c;
}

BertConfig read_bert(const ConfigFields& f) {
  BertConfig c;
  c.vocab_size = f.integer("vocab_size", c.vocab_size);
  c.hidden_size = f.integer("hidden_size", c.hidden_size);
  c.num_hidden_layers = f.integer("num_hidden_layers", c.num_hidden_layers);
  c.num_attention_heads = f.integer("num_attention_heads", c.num_attention_heads);
  c.intermediate_size = f.integer("intermediate_size", c.intermediate_size);
  c.hidden_act = f.string("hidden_act", c.hidden_act);
  c.hidden_dropout_prob = f.number("hidden_dropout_prob", c.hidden_dropout_prob);
  c.attention_probs_dropout_prob = f.number("attention_probs_dropout_prob", c.attention_probs_dropout_prob);
  c.max_position_embeddings = f.integer("max_position_embeddings", c.max_position_embeddings);
  c.type_vocab_size = f.integer("type_vocab_size", c.type_vocab_size);
  c.initializer_range = f.number("initializer_range", c.initializer_range);
  c.layer_norm_eps = f.number("layer_norm_eps", c.layer_norm_eps);
  c.pad_token_id = f.optional_integer("pad_token_id", c.pad_token_id);
  c.position_embedding_type = f.string("position_embedding_type", c.position_embedding_type);
  c.classifier_dropout = f.optional_number("classifier_dropout", c.classifier_dropout);
  return c;
}

CnnConfig read_cnn(const ConfigFields& f) {
  CnnConfig c;
  c.in_channels = f.integer("in_channels", c.in_channels);
  c.image_size = f.integer("image_size", c.image_size);
  c.conv_channels = f.integer_list("conv_channels", c.conv_channels);
  c.hidden = f.integer_list("hidden", c.hidden);
  c.dropout = f.number("dropout", c.dropout);
  return c;
}

MlpConfig read_mlp(const ConfigFields& f) {
  MlpConfig c;
  c.in_channels = f.integer("in_channels", c.in_channels);
  c.image_size = f.integer("image_size", c.image_size);
  c.hidden = f.integer_list("hidden", c.hidden);
  c.dropout = f.number("dropout", c.dropout);
  return c;
}

// ---- validation ----

// Range checks with messages naming source, field, expected and actual.
class Checker {
 public:
  explicit Checker(const std::string& source) : source_(source) {}
  [[nodiscard]] const std::string& source() const { return source_; }
  void positive(const char* field, std::int64_t value) const {
    HPCTRAIN_CHECK(value > 0, "{}: {} must be positive, got {}", source_, field, value);
  }
  void probability(const char* field, double value) const {
    HPCTRAIN_CHECK(value >= 0.0 && value <= 1.0, "{}: {} is a dropout probability, expected 0..1, got {}", source_,
                   field, value);
  }
  void non_negative(const char* field, double value) const {
    HPCTRAIN_CHECK(value >= 0.0, "{}: {} must be >= 0, got {}", source_, field, value);
  }
  void divisible(const char* width_field, std::int64_t width, const char* heads_field, std::int64_t heads) const {
    HPCTRAIN_CHECK(width % heads == 0, "{}: {} ({}) must be divisible by {} ({}): each attention head gets {} / {} "
                   "features. Hint: e.g. {} = {}", source_, width_field, width, heads_field, heads, width_field,
                   heads_field, heads_field, greatest_divisor_at_most(width, heads));
  }
  void pad_token(const std::optional<std::int64_t>& pad, std::int64_t vocab_size) const {
    HPCTRAIN_CHECK(!pad || (*pad >= 0 && *pad < vocab_size), "{}: pad_token_id {} is outside the vocabulary "
                   "[0, {})", source_, pad.value_or(0), vocab_size);
  }
  void sizes(const char* field, const std::vector<std::int64_t>& values) const {
    for (const std::int64_t value : values) {
      HPCTRAIN_CHECK(value > 0, "{}: {} must hold positive sizes, got {}", source_, field, value);
    }
  }

 private:
  static std::int64_t greatest_divisor_at_most(std::int64_t width, std::int64_t limit) {
    for (std::int64_t d = std::min<std::int64_t>(limit, 65536); d > 1; --d) {
      if (width % d == 0) return d;
    }
    return 1;
  }
  const std::string& source_;
};

void validate_model(const DistilBertConfig& c, const Checker& check) {
  check.positive("vocab_size", c.vocab_size);
  check.positive("max_position_embeddings", c.max_position_embeddings);
  check.positive("n_layers", c.n_layers);
  check.positive("n_heads", c.n_heads);
  check.positive("dim", c.dim);
  check.positive("hidden_dim", c.hidden_dim);
  check.divisible("dim", c.dim, "n_heads", c.n_heads);
  check.probability("dropout", c.dropout);
  check.probability("attention_dropout", c.attention_dropout);
  check.probability("qa_dropout", c.qa_dropout);
  check.probability("seq_classif_dropout", c.seq_classif_dropout);
  check.non_negative("initializer_range", c.initializer_range);
  check.pad_token(c.pad_token_id, c.vocab_size);
  (void)c.activation_fn();
}

void validate_model(const BertConfig& c, const Checker& check) {
  check.positive("vocab_size", c.vocab_size);
  check.positive("hidden_size", c.hidden_size);
  check.positive("num_hidden_layers", c.num_hidden_layers);
  check.positive("num_attention_heads", c.num_attention_heads);
  check.positive("intermediate_size", c.intermediate_size);
  check.positive("max_position_embeddings", c.max_position_embeddings);
  check.positive("type_vocab_size", c.type_vocab_size);
  check.divisible("hidden_size", c.hidden_size, "num_attention_heads", c.num_attention_heads);
  check.probability("hidden_dropout_prob", c.hidden_dropout_prob);
  check.probability("attention_probs_dropout_prob", c.attention_probs_dropout_prob);
  if (c.classifier_dropout) check.probability("classifier_dropout", *c.classifier_dropout);
  check.non_negative("initializer_range", c.initializer_range);
  HPCTRAIN_CHECK(c.layer_norm_eps > 0.0, "layer_norm_eps must be positive, got {}", c.layer_norm_eps);
  check.pad_token(c.pad_token_id, c.vocab_size);
  HPCTRAIN_CHECK(c.position_embedding_type == "absolute", "position_embedding_type \"{}\" is not supported; hpctrain "
                 "implements \"absolute\" only (not relative_key / relative_key_query)", c.position_embedding_type);
  (void)c.activation_fn();
}

void validate_model(const CnnConfig& c, const Checker& check) {
  check.positive("in_channels", c.in_channels);
  check.positive("image_size", c.image_size);
  HPCTRAIN_CHECK(!c.conv_channels.empty() && c.conv_channels.size() < 31, "conv_channels must list 1 to 30 conv "
                 "blocks, got {}", c.conv_channels.size());
  check.sizes("conv_channels", c.conv_channels);
  check.sizes("hidden", c.hidden);
  check.probability("dropout", c.dropout);
  // Each conv block halves the image (2x2 max-pool, docs/model-configs.md).
  HPCTRAIN_CHECK((c.image_size >> c.conv_channels.size()) >= 1, "image_size {} is too small for {} conv blocks: "
                 "each halves it; expected image_size >= {}", c.image_size, c.conv_channels.size(),
                 std::int64_t{1} << c.conv_channels.size());
}

void validate_model(const MlpConfig& c, const Checker& check) {
  check.positive("in_channels", c.in_channels);
  check.positive("image_size", c.image_size);
  check.sizes("hidden", c.hidden);
  check.probability("dropout", c.dropout);
}

void validate_model(const std::monostate&, const Checker&) {}
void validate_model(const Gpt2Config& c, const Checker& check) { detail::validate_gpt2(c, check.source()); }
void validate_model(const LlamaConfig& c, const Checker& check) { detail::validate_llama(c, check.source()); }

// model_type each typed config belongs to.
std::string_view model_type_of(const ModelConfig& model) {
  switch (model.index()) {
    case 1: return "distilbert";
    case 2: return "bert";
    case 3: return "hpctrain-cnn";
    case 4: return "hpctrain-mlp";
    case 5: return "gpt2";
    case 6: return "llama";
    case 7: return "qwen2";
    default: return "";
  }
}

}  // namespace

Activation parse_activation(std::string_view name, std::string_view field) {
  if (name == "gelu") return Activation::gelu;
  if (name == "gelu_new" || name == "gelu_pytorch_tanh") return Activation::gelu_tanh;
  if (name == "relu") return Activation::relu;
  if (name == "silu" || name == "swish") return Activation::silu;
  fail("{} \"{}\" is not supported; expected \"gelu\" (exact, erf), \"gelu_new\" or \"gelu_pytorch_tanh\" (tanh "
       "approximation), \"relu\" or \"silu\"", field, name);
}

std::string_view problem_type_name(ProblemType type) {
  switch (type) {
    case ProblemType::single_label_classification: return "single_label_classification";
    case ProblemType::multi_label_classification: return "multi_label_classification";
    case ProblemType::regression: return "regression";
    default: return "";
  }
}

void CommonConfig::set_num_labels(std::int64_t count) {
  HPCTRAIN_CHECK(count >= 1, "num_labels must be at least 1, got {}", count);
  HPCTRAIN_CHECK(count <= kMaxNumLabels, "num_labels must be at most {}, got {}", kMaxNumLabels, count);
  if (count == num_labels()) return;
  std::vector<std::string> names;
  for (std::int64_t i = 0; i < count; ++i) names.push_back("LABEL_" + std::to_string(i));
  set_labels(std::move(names));
}

void CommonConfig::set_labels(std::vector<std::string> names) {
  id2label = std::move(names);
  label2id.clear();
  for (std::size_t i = 0; i < id2label.size(); ++i) label2id.emplace(id2label[i], static_cast<std::int64_t>(i));
}

HfConfig::HfConfig(ModelConfig model_config) : model(std::move(model_config)) {
  common.model_type = std::string(model_type_of(model));
}

HfConfig HfConfig::from_json(const json& object, const std::string& source) {
  HPCTRAIN_CHECK(object.is_object(), "{}: expected a JSON object, got {}", source, detail::describe_json(object));
  const ConfigFields fields(object, source);
  HfConfig config;
  config.raw_ = object;
  config.source_ = source;
  config.common = read_common(fields);
  const std::string& type = config.common.model_type;
  if (type == "distilbert") config.model = read_distilbert(fields);
  if (type == "bert") config.model = read_bert(fields);
  if (type == "hpctrain-cnn") config.model = read_cnn(fields);
  if (type == "hpctrain-mlp") config.model = read_mlp(fields);
  if (type == "gpt2") config.model = detail::read_gpt2(fields);
  if (type == "llama") config.model = detail::read_llama(fields);
  if (type == "qwen2") config.model = detail::read_qwen2(fields);
  config.validate();
  return config;
}

HfConfig HfConfig::load(const std::filesystem::path& path) {
  const std::filesystem::path file = std::filesystem::is_directory(path) ? path / "config.json" : path;
  HPCTRAIN_CHECK(std::filesystem::is_regular_file(file), "'{}' not found. Hint: a Hugging Face model folder has a "
                 "config.json next to its weights", file.string());
  json object;
  try {
    object = json::parse(detail::read_text_file(file));
  } catch (const json::exception& error) {
    fail("'{}' is not valid JSON: {}", file.string(), error.what());
  }
  return from_json(object, file.string());
}

void HfConfig::validate() const {
  try {
    const std::string_view typed = model_type_of(model);
    HPCTRAIN_CHECK(!common.model_type.empty(), "model_type is empty; expected e.g. \"distilbert\"");
    HPCTRAIN_CHECK(typed.empty() || typed == common.model_type, "model_type \"{}\" does not match the {} settings it "
                   "holds", common.model_type, typed);
    HPCTRAIN_CHECK(!common.id2label.empty(), "num_labels must be at least 1 (id2label is empty)");
    HPCTRAIN_CHECK(common.dtype.empty() || std::find(std::begin(kDTypes), std::end(kDTypes), common.dtype) !=
                   std::end(kDTypes), "dtype \"{}\" is not supported; expected \"float32\", \"float16\" or \"bfloat16\"",
                   common.dtype);
    const Checker check(source_);
    std::visit([&](const auto& typed_model) { validate_model(typed_model, check); }, model);
  } catch (const Error& error) {
    const std::string message = error.what();
    if (message.rfind(source_ + ":", 0) == 0) throw;
    fail("{}: {}", source_, message);  // every message names the file
  }
}

namespace {
template <typename T>
const T& typed_model(const ModelConfig& model, const std::string& model_type, std::string_view wanted,
                     const std::string& source) {
  const T* typed = std::get_if<T>(&model);
  HPCTRAIN_CHECK(typed != nullptr, "{}: model_type is \"{}\", expected \"{}\"", source, model_type, wanted);
  return *typed;
}
}  // namespace

const DistilBertConfig& HfConfig::distilbert() const {
  return typed_model<DistilBertConfig>(model, common.model_type, "distilbert", source_);
}
const BertConfig& HfConfig::bert() const {
  return typed_model<BertConfig>(model, common.model_type, "bert", source_);
}
const CnnConfig& HfConfig::cnn() const {
  return typed_model<CnnConfig>(model, common.model_type, "hpctrain-cnn", source_);
}
const MlpConfig& HfConfig::mlp() const {
  return typed_model<MlpConfig>(model, common.model_type, "hpctrain-mlp", source_);
}
const Gpt2Config& HfConfig::gpt2() const {
  return typed_model<Gpt2Config>(model, common.model_type, "gpt2", source_);
}
const LlamaConfig& HfConfig::llama() const {
  return typed_model<LlamaConfig>(model, common.model_type, "llama", source_);
}
const Qwen2Config& HfConfig::qwen2() const {
  return typed_model<Qwen2Config>(model, common.model_type, "qwen2", source_);
}
const LlamaConfig& HfConfig::llama_family() const {
  if (const auto* qwen2 = std::get_if<Qwen2Config>(&model)) return *qwen2;
  return typed_model<LlamaConfig>(model, common.model_type, "llama\" or \"qwen2", source_);
}

}  // namespace hpctrain::io
