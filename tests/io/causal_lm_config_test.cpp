// config.json of the causal LMs: transformers' defaults, GPT-2's aliases, both spellings of the rotary
// settings (4.x rope_theta + rope_scaling, 5.x rope_parameters), errors naming the field, save keeping keys.
#include "hpctrain/io/hf_config.hpp"
#include "io_test_util.hpp"

#include <boost/test/unit_test.hpp>

namespace io = hpctrain::io;
using io::test::require_error;
using nlohmann::json;

namespace {

io::HfConfig parse(const std::string& text) { return io::HfConfig::from_json(json::parse(text), "test/config.json"); }

}  // namespace

BOOST_AUTO_TEST_SUITE(causal_lm_config)

BOOST_AUTO_TEST_CASE(gpt2_defaults_and_aliases) {
  const io::HfConfig config = parse(R"({"model_type": "gpt2"})");  // gpt2() refers into it
  const io::Gpt2Config& d = config.gpt2();
  BOOST_TEST(d.vocab_size == 50257);
  BOOST_TEST(d.n_positions == 1024);
  BOOST_TEST(d.n_embd == 768);
  BOOST_TEST(d.inner_size() == 3072);
  BOOST_TEST(d.layer_norm_epsilon == 1e-5);
  BOOST_TEST(d.tie_word_embeddings);
  BOOST_TEST((d.activation_fn() == io::Activation::gelu_tanh));  // gelu_new
  const io::HfConfig aliased = parse(R"({"model_type": "gpt2", "hidden_size": 64, "num_attention_heads": 8})");
  BOOST_TEST(aliased.gpt2().n_embd == 64);
  BOOST_TEST(aliased.gpt2().n_head == 8);
  BOOST_TEST(aliased.to_json().at("hidden_size") == 64);
  require_error([] { (void)parse(R"({"model_type": "gpt2", "n_embd": 64, "hidden_size": 32})"); },
                {"'n_embd' is 64", "'hidden_size' is 32"});
  require_error([] { (void)parse(R"({"model_type": "gpt2", "n_embd": 30, "n_head": 4})"); },
                {"test/config.json", "n_embd (30)", "n_head (4)"});
  require_error([] { (void)parse(R"({"model_type": "gpt2", "scale_attn_by_inverse_layer_idx": true})"); },
                {"scale_attn_by_inverse_layer_idx"});
  require_error([] { (void)parse(R"({"model_type": "gpt2", "n_layer": "2"})"); }, {"'n_layer'", "string \"2\""});
}

BOOST_AUTO_TEST_CASE(llama_and_qwen2_defaults) {
  const io::HfConfig llama = parse(R"({"model_type": "llama"})");
  const io::LlamaConfig& l = llama.llama();
  BOOST_TEST(l.vocab_size == 32000);
  BOOST_TEST(l.kv_heads() == 32);
  BOOST_TEST(l.head_size() == 128);
  BOOST_TEST(!l.tie_word_embeddings);
  BOOST_TEST(!l.attention_bias);
  BOOST_TEST(l.rope.type == "default");
  BOOST_TEST(l.rope.theta == 10000.0);
  BOOST_TEST((l.activation_fn() == io::Activation::silu));
  BOOST_TEST(&llama.llama_family() == &l);
  const io::HfConfig qwen2 = parse(R"({"model_type": "qwen2"})");
  BOOST_TEST(qwen2.qwen2().vocab_size == 151936);
  BOOST_TEST(qwen2.qwen2().attention_bias);  // q, k, v always
  BOOST_TEST(qwen2.llama_family().max_position_embeddings == 32768);
  require_error([] { (void)parse(R"({"model_type": "qwen2", "use_sliding_window": true})"); },
                {"test/config.json", "use_sliding_window"});
  require_error([&] { (void)qwen2.llama(); }, {"model_type is \"qwen2\", expected \"llama\""});
}

BOOST_AUTO_TEST_CASE(causal_lm_configs_get_no_id2label) {  // as transformers writes them: a causal LM has no labels
  for (const char* type : {"gpt2", "llama", "qwen2"}) {
    const json out = parse(std::string(R"({"model_type": ")") + type + "\"}").to_json();
    BOOST_TEST(!out.contains("id2label"), type);
    BOOST_TEST(!out.contains("label2id"), type);
  }
  BOOST_TEST(parse(R"({"model_type": "gpt2", "id2label": {"0": "a", "1": "b"}})").to_json().contains("id2label"));
  BOOST_TEST(parse(R"({"model_type": "distilbert"})").to_json().contains("id2label"));
}

BOOST_AUTO_TEST_CASE(rope_settings_in_both_spellings) {
  const io::HfConfig v4 = parse(R"({"model_type": "llama", "rope_theta": 500000.0, "rope_scaling": {"rope_type":
      "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
      "original_max_position_embeddings": 8192}})");
  const io::HfConfig v5 = parse(R"({"model_type": "llama", "rope_parameters": {"rope_type": "llama3",
      "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
      "original_max_position_embeddings": 8192}})");
  for (const io::HfConfig* config : {&v4, &v5}) {
    const io::RopeConfig& rope = config->llama().rope;
    BOOST_TEST(rope.type == "llama3");
    BOOST_TEST(rope.theta == 500000.0);
    BOOST_TEST(rope.factor == 8.0);
    BOOST_TEST(rope.original_max_position_embeddings == 8192);
  }
  // Saved in the spelling read.
  BOOST_TEST(v4.to_json().at("rope_scaling").at("rope_type") == "llama3");
  BOOST_TEST(!v4.to_json().contains("rope_parameters"));
  BOOST_TEST(v5.to_json().at("rope_parameters").at("rope_theta") == 500000.0);
  BOOST_TEST(!v5.to_json().contains("rope_theta"));
  const io::HfConfig legacy = parse(R"({"model_type": "llama", "rope_scaling": {"type": "linear", "factor": 2.0}})");
  BOOST_TEST(legacy.llama().rope.type == "linear");
  BOOST_TEST(legacy.to_json().at("rope_scaling").at("type") == "linear");
  require_error([] { (void)parse(R"({"model_type": "llama", "rope_scaling": {"rope_type": "yarn", "factor": 4.0}})"); },
                {"test/config.json", "rope_scaling rope_type \"yarn\"", "llama3"});
  require_error(
      [] { (void)parse(R"({"model_type": "llama", "rope_scaling": {"rope_type": "linear", "factor": "2"}})"); },
      {"rope_scaling", "'factor'"});
  require_error([] { (void)parse(R"({"model_type": "llama", "rope_scaling": 2})"); }, {"'rope_scaling'", "an object"});
}

BOOST_AUTO_TEST_CASE(llama_errors_name_the_field) {
  require_error(
      [] {
        (void)parse(R"({"model_type": "llama", "num_attention_heads": 6, "num_key_value_heads": 4,
                                    "hidden_size": 48})");
      },
      {"test/config.json", "num_attention_heads (6)", "num_key_value_heads (4)"});
  require_error([] { (void)parse(R"({"model_type": "llama", "hidden_size": 30, "num_attention_heads": 4})"); },
                {"hidden_size (30)", "num_attention_heads (4)"});
  require_error([] { (void)parse(R"({"model_type": "llama", "hidden_act": "gelu_fast"})"); },
                {"hidden_act \"gelu_fast\""});
  require_error([] { (void)parse(R"({"model_type": "llama", "rms_norm_eps": 0})"); }, {"rms_norm_eps"});
  // head_dim given: hidden_size need not divide.
  BOOST_TEST(parse(R"({"model_type": "llama", "hidden_size": 30, "num_attention_heads": 4, "head_dim": 8})")
                 .llama()
                 .head_size() == 8);
}

BOOST_AUTO_TEST_CASE(unknown_keys_survive_and_typed_keys_are_written) {
  const io::HfConfig config = parse(R"({"model_type": "qwen2", "hidden_size": 64, "num_attention_heads": 4,
      "num_key_value_heads": 2, "layer_types": ["full_attention"], "sliding_window": null, "bos_token_id": 7})");
  const json out = config.to_json();
  BOOST_TEST(out.at("layer_types").size() == 1u);
  BOOST_TEST(out.at("bos_token_id") == 7);
  BOOST_TEST(out.at("num_key_value_heads") == 2);
  BOOST_TEST(out.at("rope_theta") == 10000.0);  // the 4.x spelling for a file without rope settings
  BOOST_TEST(out.at("use_sliding_window") == false);
  BOOST_TEST(!out.contains("attention_bias"));  // not a Qwen2Config key
  const io::HfConfig again = io::HfConfig::from_json(out);
  BOOST_TEST(again.qwen2().hidden_size == 64);
  BOOST_TEST(again.to_json_string() == config.to_json_string());
}

BOOST_AUTO_TEST_SUITE_END()
