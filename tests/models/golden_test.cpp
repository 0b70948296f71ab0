// Logits against the independent PyTorch reference (golden/reference.py), padding invariance, HF names,
// and base (pretraining) checkpoints.
#include "fixtures.hpp"

#include "hpctrain/models/pretrained.hpp"
#include "hpctrain/models/registry.hpp"

#include <boost/test/unit_test.hpp>
#include <torch/utils.h>
#include <ATen/core/grad_mode.h>

#include <algorithm>

namespace hpctrain::models {
namespace {

using testing::golden;
using testing::golden_dir;

// The reference computes in float32 from the same (rounded) weights, so every dtype variant meets the
// same bound; only summation order differs.
constexpr double kLogitTolerance = 1e-4;

Pretrained load(const std::string& name) {
  Pretrained loaded = from_pretrained(golden_dir() / name);
  loaded.model->eval();
  return loaded;
}

at::Tensor logits_of(SequenceClassifier& model, const ModelInputs& inputs) {
  at::NoGradGuard no_grad;
  return model.forward(inputs).logits;
}

BOOST_AUTO_TEST_SUITE(golden_logits)

BOOST_AUTO_TEST_CASE(every_checkpoint_matches_the_reference) {
  for (const auto& [name, entry] : golden().at("checkpoints").items()) {
    BOOST_TEST_CONTEXT("checkpoint " << name) {
      Pretrained loaded = load(name);
      BOOST_TEST(loaded.report.newly_initialized.empty());
      BOOST_TEST(loaded.report.ignored.empty());
      BOOST_TEST(loaded.report.loaded.size() == loaded.model->named_parameters().size());
      // F16/BF16 weights are upcast to the float32 parameters.
      const bool half = name.find("f32") == std::string::npos;
      BOOST_TEST(loaded.report.converted.size() == (half ? loaded.report.loaded.size() : 0u));
      for (const auto& golden_case : entry.at("cases")) {
        BOOST_TEST_CONTEXT("case " << golden_case.at("name").get<std::string>()) {
          const at::Tensor logits = logits_of(*loaded.model, testing::inputs_of(golden_case));
          const at::Tensor expected = testing::tensor_from_json(golden_case.at("logits"), at::kFloat);
          BOOST_TEST(logits.sizes() == expected.sizes());
          BOOST_TEST(logits.scalar_type() == at::kFloat);
          BOOST_TEST(testing::max_abs_diff(logits, expected) < kLogitTolerance);
        }
      }
    }
  }
}

// Extra padding (with arbitrary token ids under mask 0) never changes the logits of real tokens.
BOOST_AUTO_TEST_CASE(padding_does_not_change_logits) {
  for (const std::string name : {"tiny-distilbert-f32", "tiny-bert-f32"}) {
    BOOST_TEST_CONTEXT("checkpoint " << name) {
      Pretrained loaded = load(name);
      const auto& cases = golden().at("checkpoints").at(name).at("cases");
      const ModelInputs batch = testing::inputs_of(cases.at(0));  // padded_batch
      const at::Tensor batch_logits = logits_of(*loaded.model, batch);
      for (int64_t row = 0; row < 3; ++row) {
        const at::Tensor alone = logits_of(*loaded.model, testing::inputs_of(cases.at(1 + row)));
        BOOST_TEST(testing::max_abs_diff(batch_logits[row], alone[0]) < 1e-5);
      }
      // Four more padded positions holding random ids and token type 1.
      torch::manual_seed(7);
      ModelInputs longer = batch;
      longer.input_ids = at::cat({batch.input_ids, at::randint(1, 100, {3, 4}, at::kLong)}, 1);
      longer.attention_mask = at::cat({batch.attention_mask, at::zeros({3, 4}, at::kLong)}, 1);
      if (batch.token_type_ids.defined()) {
        longer.token_type_ids = at::cat({batch.token_type_ids, at::ones({3, 4}, at::kLong)}, 1);
      }
      BOOST_TEST(testing::max_abs_diff(logits_of(*loaded.model, longer), batch_logits) < 1e-5);
      // A float or bool mask means the same.
      longer.attention_mask = longer.attention_mask.to(at::kBool);
      BOOST_TEST(testing::max_abs_diff(logits_of(*loaded.model, longer), batch_logits) < 1e-5);
    }
  }
}

BOOST_AUTO_TEST_CASE(parameter_names_are_hugging_faces) {
  const std::pair<const char*, const char*> pairs[] = {
      {"tiny-distilbert-f32", "DistilBertForSequenceClassification"},
      {"tiny-bert-f32", "BertForSequenceClassification"}};
  for (const auto& [folder, architecture] : pairs) {
    const auto model = testing::build(testing::read_json(golden_dir() / folder / "config.json"));
    std::vector<std::string> names;
    for (const auto& item : model->named_parameters()) names.push_back(item.key());
    const auto expected = golden().at("hf_keys").at(architecture).get<std::vector<std::string>>();
    BOOST_TEST(names == expected, boost::test_tools::per_element());  // same names, same order
    BOOST_TEST(model->spec().architecture == architecture);
  }
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(base_checkpoints)

// The loaded tensors equal the checkpoint's; names are model names.
void check_loaded_values(const SequenceClassifier& model, const StateDict& checkpoint, const std::string& prefix_added) {
  const StateDict params = state_dict(model);
  for (const auto& [name, tensor] : checkpoint) {
    const auto it = params.find(prefix_added + name);
    if (it == params.end()) continue;
    BOOST_TEST_CONTEXT(name) { BOOST_TEST(at::equal(it->second, tensor)); }
  }
}

BOOST_AUTO_TEST_CASE(distilbert_masked_lm_checkpoint_initializes_the_head) {
  torch::manual_seed(3);
  const Pretrained loaded = from_pretrained(golden_dir() / "tiny-distilbert-mlm");
  const std::vector<std::string> newly{"classifier.bias", "classifier.weight", "pre_classifier.bias",
                                       "pre_classifier.weight"};
  auto sorted = loaded.report.newly_initialized;
  std::sort(sorted.begin(), sorted.end());
  BOOST_TEST(sorted == newly, boost::test_tools::per_element());
  const std::vector<std::string> ignored{"vocab_layer_norm.bias", "vocab_layer_norm.weight", "vocab_projector.bias",
                                         "vocab_projector.weight", "vocab_transform.bias", "vocab_transform.weight"};
  BOOST_TEST(loaded.report.ignored == ignored, boost::test_tools::per_element());
  BOOST_TEST(!loaded.report.added_base_prefix);
  BOOST_TEST(loaded.report.summary().find("newly initialized") != std::string::npos);
  check_loaded_values(*loaded.model, read_weights(golden_dir() / "tiny-distilbert-mlm"), "");
  // The head is initialized as transformers' _init_weights: normal(0, 0.02) weights, zero biases.
  BOOST_TEST(loaded.model->named_parameters()["classifier.bias"].abs().max().item<float>() == 0.0f);
  const float head_std = loaded.model->named_parameters()["pre_classifier.weight"].std().item<float>();
  BOOST_TEST(head_std > 0.015f);
  BOOST_TEST(head_std < 0.025f);
}

BOOST_AUTO_TEST_CASE(bare_distilbert_model_gets_the_prefix) {
  StateDict bare;
  for (const auto& [name, tensor] : read_weights(golden_dir() / "tiny-distilbert-mlm")) {
    if (name.rfind("distilbert.", 0) == 0) bare.emplace(name.substr(11), tensor);  // DistilBertModel keys
  }
  const auto model = testing::build(testing::read_json(golden_dir() / "tiny-distilbert-f32" / "config.json"));
  const LoadReport report = load_state_dict(*model, bare, "bare DistilBertModel");
  BOOST_TEST(report.added_base_prefix);
  BOOST_TEST(report.loaded.size() == bare.size());
  BOOST_TEST(report.newly_initialized.size() == 4u);
  BOOST_TEST(report.ignored.empty());
  check_loaded_values(*model, bare, "distilbert.");
}

BOOST_AUTO_TEST_CASE(bert_for_pretraining_checkpoint_ignores_cls_and_position_ids) {
  const Pretrained loaded = from_pretrained(golden_dir() / "tiny-bert-pretraining");
  const std::vector<std::string> newly{"classifier.bias", "classifier.weight"};  // sorted
  BOOST_TEST(loaded.report.newly_initialized == newly, boost::test_tools::per_element());
  const auto& ignored = loaded.report.ignored;
  BOOST_TEST(std::count(ignored.begin(), ignored.end(), "bert.embeddings.position_ids") == 1);
  BOOST_TEST(std::all_of(ignored.begin(), ignored.end(), [](const std::string& n) {
    return n.rfind("cls.", 0) == 0 || n == "bert.embeddings.position_ids";
  }));
  BOOST_TEST(ignored.size() == 10u);  // 9 cls.* tensors + position_ids
  check_loaded_values(*loaded.model, read_weights(golden_dir() / "tiny-bert-pretraining"), "");
}

// BertForMaskedLM has no pooler: the pooler is a head module and is initialized with the classifier.
BOOST_AUTO_TEST_CASE(bert_without_pooler_initializes_pooler_and_classifier) {
  StateDict weights = read_weights(golden_dir() / "tiny-bert-pretraining");
  weights.erase("bert.pooler.dense.weight");
  weights.erase("bert.pooler.dense.bias");
  const auto model = testing::build(testing::read_json(golden_dir() / "tiny-bert-f32" / "config.json"));
  const LoadReport report = load_state_dict(*model, weights, "BertForMaskedLM");
  BOOST_TEST(report.newly_initialized.size() == 4u);
  BOOST_TEST(std::count(report.newly_initialized.begin(), report.newly_initialized.end(),
                        "bert.pooler.dense.weight") == 1);
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace
}  // namespace hpctrain::models
