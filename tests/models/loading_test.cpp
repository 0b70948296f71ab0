// Strict loading errors, legacy names, the registry, and save_pretrained -> from_pretrained identity.
#include "fixtures.hpp"

#include "hpctrain/core/error.hpp"
#include "hpctrain/io/safetensors.hpp"
#include "hpctrain/models/pretrained.hpp"
#include "hpctrain/models/registry.hpp"

#include <boost/test/unit_test.hpp>
#include <torch/utils.h>
#include <ATen/core/grad_mode.h>

#include <cstring>
#include <iterator>

namespace hpctrain::models {
namespace {

using testing::golden_dir;

std::shared_ptr<SequenceClassifier> fresh(const std::string& folder) {
  return testing::build(testing::read_json(golden_dir() / folder / "config.json"));
}

// The message of the Error `body` throws ("" when it does not throw).
template <typename Body>
std::string error_of(Body body) {
  try {
    body();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

BOOST_AUTO_TEST_SUITE(strict_loading)

BOOST_AUTO_TEST_CASE(one_message_names_every_missing_unexpected_and_wrong_shaped_tensor) {
  StateDict weights = read_weights(golden_dir() / "tiny-distilbert-f32");
  weights.erase("distilbert.transformer.layer.1.ffn.lin2.bias");
  weights.erase("distilbert.embeddings.LayerNorm.weight");
  weights.emplace("distilbert.transformer.layer.2.ffn.lin2.bias", at::zeros({32}));
  weights["classifier.weight"] = at::zeros({2, 32});
  weights["pre_classifier.bias"] = at::zeros({32}, at::kLong);

  const auto model = fresh("tiny-distilbert-f32");
  const StateDict before = state_dict(*model);
  std::vector<at::Tensor> copies;
  for (const auto& item : before) copies.push_back(item.second.clone());

  const std::string message = error_of([&] { (void)load_state_dict(*model, weights, "tiny.safetensors"); });
  BOOST_TEST_MESSAGE(message);
  BOOST_TEST(contains(message, "tiny.safetensors"));
  BOOST_TEST(contains(message, "DistilBertForSequenceClassification"));
  BOOST_TEST(contains(message, "2 missing, 1 unexpected, 1 wrong-shaped, 1 wrong-typed"));
  BOOST_TEST(contains(message, "distilbert.transformer.layer.1.ffn.lin2.bias"));
  BOOST_TEST(contains(message, "distilbert.embeddings.LayerNorm.weight"));
  BOOST_TEST(contains(message, "unexpected: distilbert.transformer.layer.2.ffn.lin2.bias"));
  BOOST_TEST(contains(message, "classifier.weight [3, 32] vs [2, 32]"));
  BOOST_TEST(contains(message, "pre_classifier.bias (Long)"));
  BOOST_TEST(contains(message, "HINT"));
  // Nothing was modified.
  std::size_t i = 0;
  for (const auto& item : state_dict(*model)) BOOST_TEST(at::equal(item.second, copies[i++]));
}

BOOST_AUTO_TEST_CASE(a_head_module_present_in_part_is_an_error) {
  StateDict weights = read_weights(golden_dir() / "tiny-distilbert-f32");
  weights.erase("classifier.bias");
  const auto model = fresh("tiny-distilbert-f32");
  const std::string message = error_of([&] { (void)load_state_dict(*model, weights, "ckpt"); });
  BOOST_TEST(contains(message, "missing: classifier.bias"));
}

BOOST_AUTO_TEST_CASE(a_checkpoint_of_another_model_type_gets_a_hint) {
  const auto model = fresh("tiny-bert-f32");
  const std::string message =
      error_of([&] { (void)load_state_dict(*model, read_weights(golden_dir() / "tiny-distilbert-f32"), "x"); });
  BOOST_TEST(contains(message, "is this a bert checkpoint?"));
}

BOOST_AUTO_TEST_CASE(legacy_gamma_beta_names_load) {
  StateDict legacy;
  for (const auto& [name, tensor] : read_weights(golden_dir() / "tiny-bert-f32")) {
    std::string key = name;
    const auto ends_with = [&](const std::string& suffix) {
      return key.size() >= suffix.size() && key.compare(key.size() - suffix.size(), suffix.size(), suffix) == 0;
    };
    if (ends_with("LayerNorm.weight")) key = key.substr(0, key.size() - 6) + "gamma";
    else if (ends_with("LayerNorm.bias")) key = key.substr(0, key.size() - 4) + "beta";
    legacy.emplace(key, tensor);
  }
  BOOST_REQUIRE(legacy.count("bert.embeddings.LayerNorm.gamma") == 1);
  const auto model = fresh("tiny-bert-f32");
  model->eval();
  const LoadReport report = load_state_dict(*model, legacy, "legacy");
  BOOST_TEST(report.renamed.size() == 10u);  // embeddings + 2 per layer x 2 layers, weight and bias
  BOOST_TEST(contains(report.summary(), "bert.embeddings.LayerNorm.gamma -> bert.embeddings.LayerNorm.weight"));
  const auto& golden_case = testing::golden().at("checkpoints").at("tiny-bert-f32").at("cases").at(0);
  at::NoGradGuard no_grad;
  const at::Tensor logits = model->forward(testing::inputs_of(golden_case)).logits;
  BOOST_TEST(testing::max_abs_diff(logits, testing::tensor_from_json(golden_case.at("logits"), at::kFloat)) < 1e-4);
}

BOOST_AUTO_TEST_CASE(unknown_model_type_lists_the_known_ones) {
  const std::string message = error_of([] { (void)testing::build({{"model_type", "roberta"}}); });
  BOOST_TEST(contains(message, "\"roberta\""));
  BOOST_TEST(contains(message, "bert, distilbert, gpt2, hpctrain-cnn, hpctrain-mlp, llama, qwen2"));
}

BOOST_AUTO_TEST_CASE(missing_folder_names_the_config) {
  const std::string message = error_of([] { (void)from_pretrained(golden_dir() / "no-such-model"); });
  BOOST_TEST(contains(message, "config.json"));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(save_pretrained_folders)

std::string file_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

BOOST_AUTO_TEST_CASE(load_save_load_is_bit_identical) {
  testing::ScratchDir scratch("save");
  for (const std::string source : {"tiny-distilbert-f32", "tiny-bert-bf16"}) {
    BOOST_TEST_CONTEXT(source) {
      const Pretrained first = from_pretrained(golden_dir() / source);
      const auto out = scratch.path() / source;
      save_pretrained(*first.model, out);
      const Pretrained second = from_pretrained(out);
      BOOST_TEST(second.report.converted.empty());  // saved as float32
      const StateDict a = state_dict(*first.model), b = state_dict(*second.model);
      BOOST_TEST(a.size() == b.size());
      for (const auto& [name, tensor] : a) {
        BOOST_TEST_CONTEXT(name) { BOOST_TEST(at::equal(tensor, b.at(name))); }
      }
      // Saving the reloaded model gives the same bytes; an F32 source file is reproduced exactly.
      const auto again = scratch.path() / (source + "-again");
      save_pretrained(*second.model, again);
      BOOST_TEST(file_bytes(out / "model.safetensors") == file_bytes(again / "model.safetensors"));
      if (source == "tiny-distilbert-f32") {
        const io::SafetensorsFile original(golden_dir() / source / "model.safetensors");
        const io::SafetensorsFile saved(out / "model.safetensors");
        BOOST_TEST(saved.metadata().at("format") == "pt");
        BOOST_TEST(saved.tensors().size() == original.tensors().size());
        for (const auto& view : original.tensors()) {
          const auto& copy = saved.tensor(view.name);
          BOOST_TEST(std::memcmp(copy.data, view.data, view.nbytes) == 0);
        }
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(config_json_says_what_transformers_needs) {
  testing::ScratchDir scratch("config");
  const Pretrained loaded = from_pretrained(golden_dir() / "tiny-bert-f16");
  save_pretrained(*loaded.model, scratch.path() / "out");
  const nlohmann::json config = testing::read_json(scratch.path() / "out" / "config.json");
  BOOST_TEST(config.at("architectures") == nlohmann::json::array({"BertForSequenceClassification"}));
  BOOST_TEST(config.at("model_type") == "bert");
  BOOST_TEST(config.at("torch_dtype") == "float32");
  BOOST_TEST(config.at("id2label").at("2") == "positive");
  BOOST_TEST(config.at("label2id").at("neutral") == 1);
  BOOST_TEST(config.at("use_cache") == true);  // keys the model does not read are kept

  // Without labels in the config, transformers' LABEL_i names are written.
  const auto model = testing::build({{"model_type", "hpctrain-mlp"}, {"num_labels", 4}, {"hidden", {8}}});
  save_pretrained(*model, scratch.path() / "mlp");
  const nlohmann::json mlp = testing::read_json(scratch.path() / "mlp" / "config.json");
  BOOST_TEST(mlp.at("id2label").at("3") == "LABEL_3");
  BOOST_TEST(from_pretrained(scratch.path() / "mlp").model->num_labels() == 4);
}

BOOST_AUTO_TEST_CASE(save_replaces_a_model_folder_and_copies_tokenizer_files) {
  testing::ScratchDir scratch("replace");
  const auto vocab = scratch.path() / "vocab.txt";
  std::ofstream(vocab) << "[PAD]\n[UNK]\n";
  const auto out = scratch.path() / "model";
  const auto model = fresh("tiny-distilbert-f32");
  save_pretrained(*model, out);
  std::ofstream(out / "stale.txt") << "old";
  save_pretrained(*model, out, {vocab});
  BOOST_TEST(std::filesystem::exists(out / "vocab.txt"));
  BOOST_TEST(!std::filesystem::exists(out / "stale.txt"));  // replaced as a whole
  for (const auto& entry : std::filesystem::directory_iterator(scratch.path())) {
    const std::string name = entry.path().filename().string();
    BOOST_TEST((name == "model" || name == "vocab.txt"), "left behind: " << name);
  }
}

BOOST_AUTO_TEST_CASE(save_refuses_to_replace_a_folder_that_is_not_a_model) {
  testing::ScratchDir scratch("refuse");
  std::ofstream(scratch.path() / "notes.txt") << "precious";
  const auto model = fresh("tiny-distilbert-f32");
  const std::string message = error_of([&] { save_pretrained(*model, scratch.path()); });
  BOOST_TEST(contains(message, "not a model folder"));
  BOOST_TEST(std::filesystem::exists(scratch.path() / "notes.txt"));
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace
}  // namespace hpctrain::models
