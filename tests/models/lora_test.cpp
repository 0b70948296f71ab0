// LoRA (models/lora.hpp, Note [LoRA]): the adapter's forward, PEFT's names and init, what trains, merging
// (Linear and GPT-2's Conv1D), strict adapter loading, errors, and gradient checkpointing with adapters.
#include "fixtures.hpp"
#include "../error_capture.hpp"

#include "hpctrain/core/error.hpp"
#include "hpctrain/models/checkpointing.hpp"
#include "hpctrain/models/lora.hpp"
#include "hpctrain/models/weights.hpp"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <boost/test/unit_test.hpp>
#include <torch/utils.h>

#include <cmath>
#include <functional>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace hpctrain::models {
namespace {

nlohmann::json lora_distilbert_config(double dropout = 0.0) {
  return {{"model_type", "distilbert"}, {"vocab_size", 100}, {"dim", 32}, {"n_layers", 2}, {"n_heads", 4},
          {"hidden_dim", 64}, {"max_position_embeddings", 64}, {"num_labels", 3}, {"dropout", dropout},
          {"attention_dropout", dropout}, {"seq_classif_dropout", dropout}};
}

std::shared_ptr<Model> lora_gpt2() {
  return build_model(io::HfConfig::from_json({{"model_type", "gpt2"}, {"vocab_size", 100}, {"n_embd", 32},
                                              {"n_layer", 2}, {"n_head", 2}, {"n_positions", 32}, {"resid_pdrop", 0.0},
                                              {"embd_pdrop", 0.0}, {"attn_pdrop", 0.0}}));
}

// DistilBERT, BERT (Linear), GPT-2 (Conv1D) and Llama, small and without dropout.
std::vector<std::shared_ptr<Model>> lora_models() {
  const nlohmann::json bert = {{"model_type", "bert"}, {"vocab_size", 100}, {"hidden_size", 32}, {"num_hidden_layers", 2},
                               {"num_attention_heads", 4}, {"intermediate_size", 64}, {"max_position_embeddings", 64},
                               {"num_labels", 3}, {"hidden_dropout_prob", 0.0}, {"attention_probs_dropout_prob", 0.0}};
  const nlohmann::json llama = {{"model_type", "llama"}, {"vocab_size", 100}, {"hidden_size", 32},
                                {"intermediate_size", 64}, {"num_hidden_layers", 2}, {"num_attention_heads", 4},
                                {"num_key_value_heads", 2}, {"max_position_embeddings", 64}, {"tie_word_embeddings", false}};
  return {testing::build(lora_distilbert_config()), testing::build(bert), lora_gpt2(),
          build_model(io::HfConfig::from_json(llama))};
}

ModelInputs lora_batch(bool labels = true) {
  ModelInputs inputs;
  inputs.input_ids = at::randint(4, 100, {3, 10}, at::kLong);
  if (labels) inputs.labels = at::randint(0, 3, {3}, at::kLong);
  return inputs;
}

// Every lora_B random, so that the adapters change the output.
void randomize_lora_b(Model& model) {
  at::NoGradGuard no_grad;
  for (const auto& item : model.named_parameters())
    if (item.key().find("lora_B") != std::string::npos) item.value().normal_(0.0, 0.1);
}

std::set<std::string> trainable_names(const Model& model) {
  std::set<std::string> out;
  for (const auto& item : model.named_parameters())
    if (item.value().requires_grad()) out.insert(item.key());
  return out;
}

double max_difference(const at::Tensor& a, const at::Tensor& b) { return (a - b).abs().max().item<double>(); }

}  // namespace

BOOST_AUTO_TEST_SUITE(lora)

BOOST_AUTO_TEST_CASE(linear_adds_the_scaled_low_rank_delta) {
  torch::manual_seed(1);
  LoraLinear linear(6, 5);
  const at::Tensor x = at::randn({4, 6});
  const at::Tensor base = linear->forward(x).detach();
  linear->attach_lora(2, /*scaling=*/3.0, /*dropout=*/0.0);
  BOOST_TEST(max_difference(linear->forward(x), base) == 0.0);  // lora_B starts at zero: nothing changes
  const at::Tensor a = linear->named_parameters()["lora_A.weight"];  // a copy: named_parameters() is a temporary
  const at::Tensor b = linear->named_parameters()["lora_B.weight"];
  BOOST_TEST(a.sizes() == at::IntArrayRef({2, 6}));
  BOOST_TEST(b.sizes() == at::IntArrayRef({5, 2}));
  BOOST_TEST(a.abs().max().item<double>() <= 1.0 / std::sqrt(6.0) + 1e-7);  // kaiming_uniform(a = sqrt(5))
  BOOST_TEST(a.abs().max().item<double>() > 0.0);
  { at::NoGradGuard no_grad; b.normal_(); }
  const at::Tensor expected = base + at::matmul(at::matmul(x, a.t()), b.t()) * 3.0;
  BOOST_TEST(max_difference(linear->forward(x), expected) < 1e-5);
}

BOOST_AUTO_TEST_CASE(only_adapters_and_modules_to_save_train) {
  auto model = testing::build(lora_distilbert_config());
  const StateDict before = state_dict(*model);
  LoraConfig config;
  config.r = 4;
  config.modules_to_save = default_modules_to_save("SEQ_CLS");
  const LoraLayout layout = apply_lora(*model, config);
  BOOST_TEST(config.task_type == "SEQ_CLS");
  BOOST_TEST((config.target_modules == std::vector<std::string>{"q_lin", "v_lin"}));  // PEFT's default for distilbert
  BOOST_TEST(layout.adapted.size() == 4u);
  std::set<std::string> expected;
  for (const char* layer : {"0", "1"})
    for (const char* lin : {"q_lin", "v_lin"})
      for (const char* ab : {"lora_A", "lora_B"})
        expected.insert(fmt::format("distilbert.transformer.layer.{}.attention.{}.{}.weight", layer, lin, ab));
  for (const char* module : {"pre_classifier", "classifier"})  // PEFT's suffix rule: "classifier" takes both
    for (const char* p : {"weight", "bias"}) expected.insert(fmt::format("{}.{}", module, p));
  BOOST_TEST((trainable_names(*model) == expected));
  // The base keeps its names and values; the adapter's names are PEFT's saved names.
  const StateDict after = state_dict(*model);
  for (const auto& [name, tensor] : before) BOOST_TEST(at::equal(after.at(name), tensor));
  const StateDict adapter = adapter_state_dict(*model);
  BOOST_TEST(adapter.size() == expected.size());
  BOOST_TEST(adapter.count("base_model.model.distilbert.transformer.layer.1.attention.v_lin.lora_B.weight") == 1u);
}

BOOST_AUTO_TEST_CASE(merging_keeps_the_logits_and_the_base_names) {
  torch::manual_seed(2);
  for (const std::shared_ptr<Model>& model : lora_models()) {  // Linear, and GPT-2's Conv1D (fan_in_fan_out)
    model->eval();
    std::set<std::string> base_names;
    for (const auto& [name, tensor] : state_dict(*model)) base_names.insert(name);
    const ModelInputs inputs = lora_batch(/*labels=*/false);
    const at::Tensor base = model->forward(inputs).logits.detach();
    LoraConfig config;
    config.r = 3, config.alpha = 12;
    config.target_modules = {"all-linear"};
    (void)apply_lora(*model, config);
    randomize_lora_b(*model);
    at::NoGradGuard no_grad;
    const at::Tensor adapted = model->forward(inputs).logits;
    merge_lora(*model);
    std::set<std::string> merged_names;
    for (const auto& [name, tensor] : state_dict(*model)) merged_names.insert(name);
    const std::string architecture = model->spec().architecture;
    BOOST_TEST((merged_names == base_names), architecture);
    BOOST_TEST(max_difference(adapted, base) > 1e-3, architecture);  // not vacuous: the adapters mattered
    BOOST_TEST(max_difference(model->forward(inputs).logits, adapted) < 1e-4, architecture);
  }
}

BOOST_AUTO_TEST_CASE(all_linear_skips_the_heads_and_resolves_full_names) {
  auto model = lora_gpt2();
  LoraConfig config;
  config.r = 2;
  config.target_modules = {"all-linear"};
  (void)apply_lora(*model, config);
  BOOST_TEST(config.task_type == "CAUSAL_LM");
  BOOST_TEST(config.target_modules.size() == 8u);  // c_attn, attn.c_proj, c_fc, mlp.c_proj in 2 blocks
  BOOST_TEST(config.target_modules.front() == "transformer.h.0.attn.c_attn");
  auto classifier = testing::build(lora_distilbert_config());
  LoraConfig heads;
  heads.r = 2, heads.target_modules = {"all-linear"}, heads.task_type = "SEQ_CLS";
  heads.modules_to_save = default_modules_to_save("SEQ_CLS");
  (void)apply_lora(*classifier, heads);
  for (const std::string& name : heads.target_modules) BOOST_TEST(name.find("classifier") == std::string::npos);
}

BOOST_AUTO_TEST_CASE(unknown_target_lists_the_linear_modules) {
  auto model = testing::build(lora_distilbert_config());
  LoraConfig config;
  config.r = 2;
  config.target_modules = {"q_lin", "query"};
  try {
    (void)apply_lora(*model, config);
    BOOST_FAIL("expected an Error");
  } catch (const Error& error) {
    const std::string message = error.what();
    BOOST_TEST(message.find("'query' names no linear module") != std::string::npos, message);
    BOOST_TEST(message.find("q_lin, k_lin, v_lin, out_lin, lin1, lin2, pre_classifier, classifier") != std::string::npos,
               message);
  }
}

BOOST_AUTO_TEST_CASE(adapter_tensors_load_strictly) {
  torch::manual_seed(3);
  auto trained = testing::build(lora_distilbert_config());
  LoraConfig config;
  config.r = 2;
  (void)apply_lora(*trained, config);
  randomize_lora_b(*trained);
  auto fresh = testing::build(lora_distilbert_config());
  {
    at::NoGradGuard no_grad;  // the same base
    for (const auto& [name, tensor] : state_dict(*trained))
      if (name.find("lora_") == std::string::npos) fresh->named_parameters()[name].copy_(tensor);
  }
  LoraConfig same = config;
  (void)apply_lora(*fresh, same);
  load_adapter_state_dict(*fresh, adapter_state_dict(*trained), "test");
  const ModelInputs inputs = lora_batch();
  trained->eval(), fresh->eval();
  BOOST_TEST(max_difference(trained->forward(inputs).logits, fresh->forward(inputs).logits) == 0.0);
  StateDict missing = adapter_state_dict(*trained);
  missing.erase(missing.begin());
  BOOST_CHECK_THROW(load_adapter_state_dict(*fresh, missing, "test"), Error);
}

BOOST_AUTO_TEST_CASE(gradient_checkpointing_gives_the_same_adapter_gradients) {
  auto model = testing::build(lora_distilbert_config(/*dropout=*/0.1));
  LoraConfig config;
  config.r = 4, config.dropout = 0.1;
  (void)apply_lora(*model, config);
  randomize_lora_b(*model);
  model->train();
  const ModelInputs inputs = lora_batch();
  const auto gradients = [&](bool checkpointing) {
    set_gradient_checkpointing(*model, checkpointing);
    for (auto& p : model->parameters()) p.mutable_grad() = at::Tensor();
    torch::manual_seed(11);
    model->forward(inputs).loss.backward();
    std::map<std::string, at::Tensor> out;
    for (const auto& item : model->named_parameters())
      if (item.value().grad().defined()) out.emplace(item.key(), item.value().grad().clone());
    return out;
  };
  const auto plain = gradients(false), checkpointed = gradients(true);
  BOOST_TEST(plain.size() == trainable_names(*model).size());  // the frozen base gets no gradient
  BOOST_TEST(checkpointed.size() == plain.size());
  for (const auto& [name, grad] : plain) {
    BOOST_TEST(grad.abs().max().item<double>() > 0.0, name);
    BOOST_TEST(max_difference(checkpointed.at(name), grad) <= 1e-5 * grad.abs().max().item<double>(), name);
  }
}

BOOST_AUTO_TEST_CASE(fan_in_fan_out_is_written_for_conv1d_targets) {  // as peft writes it for GPT-2
  auto gpt2 = lora_gpt2();
  LoraConfig conv1d;
  conv1d.r = 2;
  conv1d.target_modules = {"c_attn"};
  (void)apply_lora(*gpt2, conv1d);
  BOOST_TEST(conv1d.to_peft_json()["fan_in_fan_out"] == true);
  auto distilbert = testing::build(lora_distilbert_config());
  LoraConfig linear;
  linear.r = 2;
  (void)apply_lora(*distilbert, linear);
  BOOST_TEST(linear.to_peft_json()["fan_in_fan_out"] == false);
}

BOOST_AUTO_TEST_CASE(peft_config_round_trip_and_refusals) {
  LoraConfig config;
  config.r = 8, config.alpha = 16, config.dropout = 0.05, config.task_type = "CAUSAL_LM";
  config.target_modules = {"c_attn"};
  const nlohmann::json json = config.to_peft_json();
  BOOST_TEST(json["peft_type"] == "LORA");
  BOOST_TEST(json["modules_to_save"].is_null());
  const LoraConfig back = LoraConfig::from_peft_json(json, "x");
  BOOST_TEST(back.r == 8);
  BOOST_TEST(back.scaling() == 2.0);
  BOOST_TEST((back.target_modules == config.target_modules));
  nlohmann::json dora = json;
  dora["use_dora"] = true;
  BOOST_CHECK_THROW((void)LoraConfig::from_peft_json(dora, "x"), Error);
  nlohmann::json regex = json;
  regex["target_modules"] = ".*attn";
  BOOST_CHECK_THROW((void)LoraConfig::from_peft_json(regex, "x"), Error);
}

// Note [Adapter config checks]: each field of adapter_config.json checked as config.json's are, naming the file and
// the field (never a --lora-* option the user did not give); an absurd r refused before anything is allocated.
BOOST_AUTO_TEST_CASE(adapter_config_fields_name_the_file_and_field) {
  LoraConfig config;
  config.r = 8, config.task_type = "SEQ_CLS", config.target_modules = {"q_lin"};
  const nlohmann::json good = config.to_peft_json();
  const auto message = [&](const std::function<void(nlohmann::json&)>& edit) {
    nlohmann::json json = good;
    edit(json);
    return hpctrain::testing::error_message([&] { (void)LoraConfig::from_peft_json(json, "A/adapter_config.json"); });
  };
  const std::vector<std::pair<std::function<void(nlohmann::json&)>, std::string>> cases = {
      {[](nlohmann::json& j) { j["r"] = "8"; }, "field 'r': expected the adapter's rank, an integer from 1 to 65536, got string \"8\""},
      {[](nlohmann::json& j) { j.erase("r"); }, "field 'r': expected the adapter's rank, an integer from 1 to 65536, got nothing (missing)"},
      {[](nlohmann::json& j) { j["r"] = 1000000000; }, "A/adapter_config.json: field 'r' 1000000000: expected the adapter's rank"},
      {[](nlohmann::json& j) { j["r"] = 0; }, "field 'r' 0: expected"},
      {[](nlohmann::json& j) { j["lora_alpha"] = "16"; }, "field 'lora_alpha': expected a finite number, got string \"16\""},
      {[](nlohmann::json& j) { j["lora_dropout"] = 2; }, "field 'lora_dropout' 2: expected a probability in [0, 1)"},
      {[](nlohmann::json& j) { j["target_modules"] = 5; }, "field 'target_modules' must be a list of module names, got number 5"},
      {[](nlohmann::json& j) { j["target_modules"] = {"q_lin", 3}; }, "field 'target_modules': expected module names, got number 3"},
      {[](nlohmann::json& j) { j.erase("target_modules"); }, "field 'target_modules': expected a list of module names"},
      {[](nlohmann::json& j) { j["use_rslora"] = "yes"; }, "field 'use_rslora': expected true or false"},
  };
  for (const auto& [edit, expected] : cases) {
    const std::string text = message(edit);
    BOOST_TEST(text.find("A/adapter_config.json") != std::string::npos, text);
    BOOST_TEST(text.find(expected) != std::string::npos, text);
    BOOST_TEST(text.find("--lora") == std::string::npos, text);
  }
  // apply_lora names the file's field too.
  auto model = testing::build(lora_distilbert_config());
  nlohmann::json unknown = good;
  unknown["target_modules"] = {"query"};
  LoraConfig from_file = LoraConfig::from_peft_json(unknown, "A/adapter_config.json");
  const std::string text = hpctrain::testing::error_message([&] { (void)apply_lora(*model, from_file); });
  BOOST_TEST(text.find("A/adapter_config.json: field 'target_modules': 'query' names no linear module") != std::string::npos,
             text);
}

BOOST_AUTO_TEST_CASE(a_non_finite_adapter_tensor_names_the_adapter_file) {
  auto trained = testing::build(lora_distilbert_config());
  LoraConfig config;
  config.r = 2;
  (void)apply_lora(*trained, config);
  StateDict tensors = adapter_state_dict(*trained);
  tensors.begin()->second = tensors.begin()->second.detach().clone().fill_(std::nan(""));
  auto fresh = testing::build(lora_distilbert_config());
  (void)apply_lora(*fresh, config);
  const std::string text =
      hpctrain::testing::error_message([&] { load_adapter_state_dict(*fresh, tensors, "A/adapter_model.safetensors"); });
  BOOST_TEST(text.find("'A/adapter_model.safetensors': tensor '") != std::string::npos, text);
  BOOST_TEST(text.find("NaN/Inf") != std::string::npos, text);
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace hpctrain::models
