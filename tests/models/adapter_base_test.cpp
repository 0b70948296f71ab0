// A base sized for its adapter's head (models/adapter_base.hpp, Note [Adapter labels]): a base saved with 2 labels
// and an adapter trained with a 3-label head load together, with the labels from lora_base.json or, without it
// (an adapter saved by peft), from the head's size and the dataset's names.
#include "fixtures.hpp"

#include "hpctrain/models/adapter_base.hpp"
#include "hpctrain/models/lora.hpp"
#include "hpctrain/models/weights.hpp"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <boost/test/unit_test.hpp>
#include <torch/utils.h>

#include <fstream>
#include <string>
#include <vector>

namespace hpctrain::models {
namespace {

nlohmann::json relabel_config(int num_labels) {
  return {{"model_type", "distilbert"}, {"vocab_size", 100}, {"dim", 32}, {"n_layers", 1}, {"n_heads", 4},
          {"hidden_dim", 64}, {"max_position_embeddings", 64}, {"num_labels", num_labels}, {"dropout", 0.0},
          {"attention_dropout", 0.0}, {"seq_classif_dropout", 0.0}};
}

// A 3-label model with the base's encoder, trained adapters (random lora_B) and its own head, saved to `dir`.
std::shared_ptr<Model> adapted_three_labels(const Model& base, const std::filesystem::path& dir) {
  auto model = testing::build(relabel_config(3));
  StateDict weights = state_dict(base);
  drop_resized_head(*model, weights);
  (void)load_state_dict(*model, weights, "base");
  LoraConfig config;
  config.r = 2;
  config.modules_to_save = default_modules_to_save("SEQ_CLS");
  (void)apply_lora(*model, config);
  {
    at::NoGradGuard no_grad;
    for (const auto& item : model->named_parameters())
      if (item.key().find("lora_B") != std::string::npos) item.value().normal_(0.0, 0.1);
  }
  std::filesystem::create_directories(dir);
  write_adapter_files(*model, config, dir);
  return model;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(adapter_base)

BOOST_AUTO_TEST_CASE(a_two_label_base_takes_the_adapters_three_label_head) {
  torch::manual_seed(4);
  testing::ScratchDir scratch("adapter-base");
  auto base = testing::build(relabel_config(2));
  save_pretrained(*base, scratch.path() / "base");
  auto trained = adapted_three_labels(*base, scratch.path() / "adapter");
  const std::vector<std::string> dataset = {"neg", "neu", "pos"};

  // Without lora_base.json (peft's folder): the head's size, the dataset's names when their count matches.
  io::HfConfig config = adapter_base_config(scratch.path() / "base", scratch.path() / "adapter", dataset);
  BOOST_TEST((config.common.id2label == dataset));
  config = adapter_base_config(scratch.path() / "base", scratch.path() / "adapter", {"a", "b"});
  BOOST_TEST((config.common.id2label == std::vector<std::string>{"LABEL_0", "LABEL_1", "LABEL_2"}));
  // With lora_base.json's id2label (hpctrain's folder): its names win.
  io::CommonConfig recorded;
  recorded.set_labels({"x", "y", "z"});
  std::ofstream(scratch.path() / "adapter" / kAdapterBaseName) << adapter_labels_json(recorded).dump();
  config = adapter_base_config(scratch.path() / "base", scratch.path() / "adapter", dataset);
  BOOST_TEST((config.common.id2label == std::vector<std::string>{"x", "y", "z"}));
  BOOST_TEST(config.common.label2id.at("z") == 2);

  const Loaded<Model> loaded = load_pretrained_with_adapter(scratch.path() / "base", scratch.path() / "adapter", config);
  BOOST_TEST(loaded.report.newly_initialized.empty());  // the adapter filled in the resized head
  trained->eval();
  loaded.model->eval();
  ModelInputs inputs;
  inputs.input_ids = at::randint(4, 100, {3, 8}, at::kLong);
  const at::Tensor expected = trained->forward(inputs).logits, got = loaded.model->forward(inputs).logits;
  BOOST_TEST(got.size(1) == 3);
  BOOST_TEST(testing::max_abs_diff(got, expected) < 1e-6);
}

BOOST_AUTO_TEST_CASE(a_base_of_the_same_size_is_unchanged) {
  testing::ScratchDir scratch("adapter-same");
  auto base = testing::build(relabel_config(3));
  save_pretrained(*base, scratch.path() / "base");
  (void)adapted_three_labels(*base, scratch.path() / "adapter");
  const io::HfConfig config = adapter_base_config(scratch.path() / "base", scratch.path() / "adapter", {"a", "b", "c"});
  BOOST_TEST((config.common.id2label == io::HfConfig::load(scratch.path() / "base").common.id2label));
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace hpctrain::models
