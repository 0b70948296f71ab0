// config.json: defaults, validation messages, unknown-key preservation, id2label, vision configs.
#include "hpctrain/io/hf_config.hpp"
#include "io_test_util.hpp"

#include <boost/test/unit_test.hpp>

namespace io = hpctrain::io;
using io::test::read_bytes;
using io::test::require_error;
using io::test::ScratchDir;
using io::test::write_bytes;
using nlohmann::json;

namespace {

// distilbert-base-uncased's config.json as published on the Hub.
const char* kDistilBertBaseUncased = R"({
  "activation": "gelu",
  "architectures": ["DistilBertForMaskedLM"],
  "attention_dropout": 0.1,
  "dim": 768,
  "dropout": 0.1,
  "hidden_dim": 3072,
  "initializer_range": 0.02,
  "max_position_embeddings": 512,
  "model_type": "distilbert",
  "n_heads": 12,
  "n_layers": 6,
  "pad_token_id": 0,
  "qa_dropout": 0.1,
  "seq_classif_dropout": 0.2,
  "sinusoidal_pos_embds": false,
  "tie_weights_": true,
  "transformers_version": "4.10.0.dev0",
  "vocab_size": 30522
})";

io::HfConfig parse(const std::string& text) { return io::HfConfig::from_json(json::parse(text), "test/config.json"); }

}  // namespace

BOOST_AUTO_TEST_SUITE(hf_config)

BOOST_AUTO_TEST_CASE(distilbert_defaults_when_keys_are_absent) {
  const io::HfConfig config = parse(R"({"model_type": "distilbert"})");
  const io::DistilBertConfig& d = config.distilbert();
  BOOST_TEST(d.vocab_size == 30522);
  BOOST_TEST(d.max_position_embeddings == 512);
  BOOST_TEST(!d.sinusoidal_pos_embds);
  BOOST_TEST(d.n_layers == 6);
  BOOST_TEST(d.n_heads == 12);
  BOOST_TEST(d.dim == 768);
  BOOST_TEST(d.hidden_dim == 3072);
  BOOST_TEST(d.dropout == 0.1);
  BOOST_TEST(d.attention_dropout == 0.1);
  BOOST_TEST(d.activation == "gelu");
  BOOST_TEST((d.activation_fn() == io::Activation::gelu));
  BOOST_TEST(d.initializer_range == 0.02);
  BOOST_TEST(d.qa_dropout == 0.1);
  BOOST_TEST(d.seq_classif_dropout == 0.2);
  BOOST_TEST(d.pad_token_id == std::optional<std::int64_t>(0));
  BOOST_TEST(io::DistilBertConfig::layer_norm_eps == 1e-12);
  // PretrainedConfig defaults: two labels LABEL_0 / LABEL_1.
  BOOST_TEST(config.common.num_labels() == 2);
  BOOST_TEST(config.common.id2label == std::vector<std::string>({"LABEL_0", "LABEL_1"}), boost::test_tools::per_element());
  BOOST_TEST(config.common.label2id.at("LABEL_1") == 1);
  BOOST_TEST((config.common.problem_type == io::ProblemType::unset));
  BOOST_TEST(config.common.dtype.empty());
}

BOOST_AUTO_TEST_CASE(bert_defaults_when_keys_are_absent) {
  const io::HfConfig config = parse(R"({"model_type": "bert"})");
  const io::BertConfig& b = config.bert();
  BOOST_TEST(b.vocab_size == 30522);
  BOOST_TEST(b.hidden_size == 768);
  BOOST_TEST(b.num_hidden_layers == 12);
  BOOST_TEST(b.num_attention_heads == 12);
  BOOST_TEST(b.intermediate_size == 3072);
  BOOST_TEST(b.hidden_act == "gelu");
  BOOST_TEST(b.hidden_dropout_prob == 0.1);
  BOOST_TEST(b.attention_probs_dropout_prob == 0.1);
  BOOST_TEST(b.max_position_embeddings == 512);
  BOOST_TEST(b.type_vocab_size == 2);
  BOOST_TEST(b.initializer_range == 0.02);
  BOOST_TEST(b.layer_norm_eps == 1e-12);
  BOOST_TEST(b.pad_token_id == std::optional<std::int64_t>(0));
  BOOST_TEST(b.position_embedding_type == "absolute");
  BOOST_TEST(!b.classifier_dropout.has_value());
  BOOST_TEST(b.effective_classifier_dropout() == 0.1);
  BOOST_TEST(parse(R"({"model_type": "bert", "classifier_dropout": 0.3})").bert().effective_classifier_dropout() == 0.3);
  BOOST_TEST(!parse(R"({"model_type": "bert", "pad_token_id": null})").bert().pad_token_id.has_value());
}

BOOST_AUTO_TEST_CASE(hub_config_reads_and_round_trips_unknown_keys) {
  ScratchDir dir;
  write_bytes(dir / "config.json", kDistilBertBaseUncased);
  const io::HfConfig config = io::HfConfig::load(dir.path());
  BOOST_TEST(config.model_type() == "distilbert");
  BOOST_TEST(config.common.architectures == std::vector<std::string>({"DistilBertForMaskedLM"}), boost::test_tools::per_element());
  BOOST_TEST(config.common.transformers_version == "4.10.0.dev0");
  const json out = config.to_json();
  BOOST_TEST(out.at("tie_weights_") == true);  // unknown key kept
  BOOST_TEST(out.at("dim") == 768);
  BOOST_TEST(out.at("id2label").at("1") == "LABEL_1");
  // Every key of the original survives with its value.
  const json original = json::parse(kDistilBertBaseUncased);
  for (const auto& [key, value] : original.items()) BOOST_TEST(out.at(key) == value, key);

  config.save(dir.path());
  const std::string text = read_bytes(dir / "config.json");
  BOOST_TEST(text.rfind("{\n  \"activation\": \"gelu\",\n  \"architectures\": [\n    \"DistilBertForMaskedLM\"\n  ],", 0) == 0);
  BOOST_TEST(text.back() == '\n');
  const io::HfConfig again = io::HfConfig::load(dir / "config.json");
  BOOST_TEST(again.to_json_string() == text);
}

BOOST_AUTO_TEST_CASE(edits_overwrite_only_owned_keys) {
  io::HfConfig config = parse(R"({"model_type": "bert", "use_cache": true, "hidden_size": 256,
                                  "num_attention_heads": 4, "torch_dtype": "float32", "custom": {"x": [1, 2]}})");
  auto& bert = std::get<io::BertConfig>(config.model);
  bert.num_hidden_layers = 2;
  config.common.set_labels({"neg", "pos", "neutral"});
  config.common.problem_type = io::ProblemType::single_label_classification;
  config.common.dtype = "bfloat16";
  const json out = config.to_json();
  BOOST_TEST(out.at("use_cache") == true);
  BOOST_TEST(out.at("custom") == json::parse(R"({"x": [1, 2]})"));
  BOOST_TEST(out.at("num_hidden_layers") == 2);
  BOOST_TEST(out.at("hidden_size") == 256);
  BOOST_TEST(out.at("torch_dtype") == "bfloat16");
  BOOST_TEST(!out.contains("dtype"));
  BOOST_TEST(out.at("problem_type") == "single_label_classification");
  BOOST_TEST(out.at("id2label") == json::parse(R"({"0": "neg", "1": "pos", "2": "neutral"})"));
  BOOST_TEST(out.at("label2id") == json::parse(R"({"neg": 0, "pos": 1, "neutral": 2})"));
  BOOST_TEST(!out.contains("num_labels"));  // transformers does not write it either
  const io::HfConfig reread = io::HfConfig::from_json(out);
  BOOST_TEST(reread.common.num_labels() == 3);
  BOOST_TEST(reread.bert().num_hidden_layers == 2);
}

BOOST_AUTO_TEST_CASE(id2label_num_labels_and_label2id) {
  const io::HfConfig labelled = parse(R"({"model_type": "distilbert",
      "id2label": {"0": "NEGATIVE", "1": "POSITIVE", "2": "MIXED"}, "label2id": {"NEGATIVE": 0, "POSITIVE": 1, "MIXED": 2}})");
  BOOST_TEST(labelled.common.num_labels() == 3);
  BOOST_TEST(labelled.common.id2label.at(2) == "MIXED");
  // Keys out of order in the file are fine; label2id is derived when absent.
  const io::HfConfig unordered = parse(R"({"model_type": "bert", "id2label": {"1": "b", "0": "a"}})");
  BOOST_TEST(unordered.common.id2label == std::vector<std::string>({"a", "b"}), boost::test_tools::per_element());
  BOOST_TEST(unordered.common.label2id.at("b") == 1);
  // num_labels alone names LABEL_i, and is kept in step when written back.
  io::HfConfig counted = parse(R"({"model_type": "bert", "num_labels": 5})");
  BOOST_TEST(counted.common.id2label.at(4) == "LABEL_4");
  counted.common.set_num_labels(3);
  BOOST_TEST(counted.to_json().at("num_labels") == 3);
  BOOST_TEST(counted.to_json().at("id2label").size() == 3u);
  BOOST_TEST(parse(R"({"model_type": "bert", "num_labels": 1, "problem_type": "regression"})").common.num_labels() == 1);

  require_error([] { (void)parse(R"({"model_type": "bert", "num_labels": 3, "id2label": {"0": "a", "1": "b"}})"); },
                {"test/config.json", "num_labels is 3", "2 classes"});
  require_error([] { (void)parse(R"({"model_type": "bert", "id2label": {"0": "a", "2": "b"}})"); },
                {"id2label key \"2\"", "\"0\"..\"1\""});
  require_error([] { (void)parse(R"({"model_type": "bert", "id2label": {"zero": "a"}})"); }, {"\"zero\""});
  require_error([] { (void)parse(R"({"model_type": "bert", "id2label": {"0": 5}})"); }, {"id2label[\"0\"]", "string"});
  require_error([] { (void)parse(R"({"model_type": "bert", "id2label": ["a", "b"]})"); }, {"'id2label'", "array"});
  require_error([] { (void)parse(R"({"model_type": "bert", "label2id": {"a": "0"}})"); }, {"label2id[\"a\"]"});
  require_error([] { (void)parse(R"({"model_type": "bert", "num_labels": 0})"); }, {"num_labels", "at least 1"});
}

BOOST_AUTO_TEST_CASE(wrong_types_name_field_expected_and_actual) {
  require_error([] { (void)parse(R"({"model_type": "distilbert", "n_layers": "6"})"); },
                {"test/config.json", "'n_layers'", "an integer", "string \"6\"", "without quotes"});
  require_error([] { (void)parse(R"({"model_type": "distilbert", "dim": 768.5})"); }, {"'dim'", "integer", "768.5"});
  require_error([] { (void)parse(R"({"model_type": "distilbert", "dropout": "0.1"})"); }, {"'dropout'", "a number"});
  require_error([] { (void)parse(R"({"model_type": "distilbert", "sinusoidal_pos_embds": 1})"); },
                {"'sinusoidal_pos_embds'", "true or false", "number 1"});
  require_error([] { (void)parse(R"({"model_type": "bert", "hidden_act": 3})"); }, {"'hidden_act'", "a string"});
  require_error([] { (void)parse(R"({"model_type": "bert", "architectures": "BertModel"})"); }, {"'architectures'"});
  require_error([] { (void)parse(R"({"model_type": "bert", "vocab_size": null})"); }, {"'vocab_size'", "null"});
  require_error([] { (void)parse(R"({"n_layers": 6})"); }, {"no 'model_type'"});
  require_error([] { (void)io::HfConfig::from_json(json::array()); }, {"JSON object"});
}

BOOST_AUTO_TEST_CASE(impossible_values_are_rejected) {
  require_error([] { (void)parse(R"({"model_type": "distilbert", "dim": 768, "n_heads": 5})"); },
                {"test/config.json", "dim (768) must be divisible by n_heads (5)"});
  require_error([] { (void)parse(R"({"model_type": "bert", "hidden_size": 100, "num_attention_heads": 12})"); },
                {"hidden_size (100)", "num_attention_heads (12)"});
  require_error([] { (void)parse(R"({"model_type": "distilbert", "activation": "gelu_fast"})"); },
                {"test/config.json", "activation \"gelu_fast\"", "\"gelu\" (exact, erf)", "gelu_new", "relu", "silu"});
  require_error([] { (void)parse(R"({"model_type": "bert", "hidden_act": "quick_gelu"})"); }, {"hidden_act \"quick_gelu\""});
  require_error([] { (void)parse(R"({"model_type": "distilbert", "n_layers": 0})"); }, {"n_layers must be positive, got 0"});
  require_error([] { (void)parse(R"({"model_type": "distilbert", "dropout": 1.5})"); }, {"dropout", "0..1", "1.5"});
  require_error([] { (void)parse(R"({"model_type": "distilbert", "pad_token_id": 30522})"); }, {"pad_token_id 30522"});
  require_error([] { (void)parse(R"({"model_type": "bert", "position_embedding_type": "relative_key"})"); },
                {"relative_key", "absolute"});
  require_error([] { (void)parse(R"({"model_type": "bert", "problem_type": "ranking"})"); }, {"\"ranking\"", "regression"});
  require_error([] { (void)parse(R"({"model_type": "bert", "torch_dtype": "float8"})"); }, {"\"float8\"", "bfloat16"});
  require_error([] { (void)parse(R"({"model_type": "distilbert", "dim": 512, "hidden_size": 768})"); },
                {"'dim' is 512", "'hidden_size' is 768"});
  io::HfConfig edited = parse(R"({"model_type": "bert"})");
  std::get<io::BertConfig>(edited.model).num_attention_heads = 7;
  require_error([&] { (void)edited.to_json(); }, {"num_attention_heads (7)"});
}

BOOST_AUTO_TEST_CASE(activations_and_aliases) {
  BOOST_TEST((io::parse_activation("gelu_new") == io::Activation::gelu_tanh));
  BOOST_TEST((io::parse_activation("gelu_pytorch_tanh") == io::Activation::gelu_tanh));
  BOOST_TEST((io::parse_activation("relu") == io::Activation::relu));
  BOOST_TEST((io::parse_activation("silu") == io::Activation::silu));
  // DistilBertConfig.attribute_map: hidden_size -> dim, etc.
  const io::HfConfig aliased = parse(R"({"model_type": "distilbert", "hidden_size": 256, "num_attention_heads": 4,
                                         "num_hidden_layers": 3})");
  BOOST_TEST(aliased.distilbert().dim == 256);
  BOOST_TEST(aliased.distilbert().n_heads == 4);
  BOOST_TEST(aliased.distilbert().n_layers == 3);
  BOOST_TEST(aliased.to_json().at("hidden_size") == 256);
}

BOOST_AUTO_TEST_CASE(dtype_spellings_and_generic_models) {
  BOOST_TEST(parse(R"({"model_type": "bert", "dtype": "bfloat16"})").common.dtype == "bfloat16");
  BOOST_TEST(parse(R"({"model_type": "bert", "torch_dtype": "float16"})").common.dtype == "float16");
  BOOST_TEST(parse(R"({"model_type": "bert", "dtype": "float32"})").to_json().at("dtype") == "float32");
  const io::HfConfig roberta = parse(R"({"model_type": "roberta", "hidden_size": 1024, "id2label": {"0": "x"}})");
  BOOST_TEST(!roberta.is_known_model());
  BOOST_TEST(roberta.common.num_labels() == 1);
  BOOST_TEST(roberta.to_json().at("hidden_size") == 1024);
  require_error([&] { (void)roberta.bert(); }, {"\"roberta\"", "\"bert\""});
}

BOOST_AUTO_TEST_CASE(vision_configs) {
  const io::HfConfig cnn = parse(R"({"model_type": "hpctrain-cnn"})");
  BOOST_TEST(cnn.cnn().in_channels == 3);
  BOOST_TEST(cnn.cnn().image_size == 32);
  BOOST_TEST(cnn.cnn().conv_channels == std::vector<std::int64_t>({32, 64}), boost::test_tools::per_element());
  BOOST_TEST(cnn.cnn().hidden == std::vector<std::int64_t>({128}), boost::test_tools::per_element());
  BOOST_TEST(cnn.cnn().dropout == 0.1);

  io::HfConfig mnist(io::MlpConfig{1, 28, {256, 128}, 0.2});
  mnist.common.set_labels({"0", "1", "2", "3", "4", "5", "6", "7", "8", "9"});
  const json out = mnist.to_json();
  BOOST_TEST(out.at("model_type") == "hpctrain-mlp");
  BOOST_TEST(out.at("num_labels") == 10);
  BOOST_TEST(out.at("hidden") == json::parse("[256, 128]"));
  const io::HfConfig reread = io::HfConfig::from_json(out);
  BOOST_TEST(reread.mlp().image_size == 28);
  BOOST_TEST(reread.common.num_labels() == 10);

  require_error([] { (void)parse(R"({"model_type": "hpctrain-cnn", "conv_channels": [32, 0]})"); }, {"conv_channels", "0"});
  require_error([] { (void)parse(R"({"model_type": "hpctrain-cnn", "conv_channels": []})"); }, {"conv_channels"});
  require_error([] { (void)parse(R"({"model_type": "hpctrain-cnn", "image_size": 2, "conv_channels": [8, 8]})"); },
                {"image_size 2", ">= 4"});
  require_error([] { (void)parse(R"({"model_type": "hpctrain-mlp", "hidden": [128, "64"]})"); },
                {"'hidden'", "array of integers"});
}

BOOST_AUTO_TEST_CASE(load_errors_name_the_file) {
  ScratchDir dir;
  require_error([&] { (void)io::HfConfig::load(dir.path()); }, {"config.json", "not found"});
  write_bytes(dir / "config.json", "{\"model_type\": \"bert\",}");
  require_error([&] { (void)io::HfConfig::load(dir.path()); }, {"config.json", "not valid JSON"});
  write_bytes(dir / "config.json", "{\"model_type\": \"bert\", \"n\": NaN}");
  require_error([&] { (void)io::HfConfig::load(dir / "config.json"); }, {"not valid JSON"});
}

BOOST_AUTO_TEST_SUITE_END()
