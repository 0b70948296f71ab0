// The one model <-> dataset check (Note [Model fits the dataset]) and non-finite weights and logits in
// evaluate/predict, with the single-process communicator.
#include <boost/test/unit_test.hpp>

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include "../error_capture.hpp"
#include "fixtures.hpp"
#include "hpctrain/core/error.hpp"
#include "hpctrain/data/dataset_reader.hpp"
#include "hpctrain/models/registry.hpp"
#include "hpctrain/train/compatibility.hpp"
#include "hpctrain/train/evaluation.hpp"

using namespace trainer_test;
using namespace hpctrain;
using hpctrain::testing::contains;
using hpctrain::testing::error_message;

namespace {

nlohmann::json distilbert(int64_t vocab, int64_t positions, int64_t labels) {
  nlohmann::json id2label = nlohmann::json::object();
  for (int64_t i = 0; i < labels; ++i) id2label[std::to_string(i)] = "L" + std::to_string(i);
  return {{"model_type", "distilbert"},
          {"vocab_size", vocab},
          {"dim", 16},
          {"n_layers", 1},
          {"n_heads", 2},
          {"hidden_dim", 32},
          {"max_position_embeddings", positions},
          {"id2label", id2label}};
}

std::string check(const nlohmann::json& config, const data::DatasetReader& dataset, bool labels = true) {
  return error_message([&] {
    train::check_model_fits_dataset(io::HfConfig::from_json(config), "MODEL", dataset, {"train", "validation"}, labels);
  });
}

// A pair dataset (token_type_ids stored) of kVocab tokens.
fs::path write_pair_dataset(const fs::path& path) {
  data::FileAttributes attributes;
  attributes.label_names = {"a", "b", "c"};
  attributes.tokenizer = {{"vocab_size", kVocab}};
  data::TextExamples text;
  text.append({2, 7, 3, 8, 3}, {0, 0, 0, 1, 1}, 1, 0);
  text.append({2, 9, 3, 6, 6, 3}, {0, 0, 0, 1, 1, 1}, 0, 1);
  data::DatasetWriter writer(path, attributes, {data::Compression::none, 1}, true);
  writer.write_text_split("train", text, true);
  writer.commit();
  return path;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(compatibility)

BOOST_AUTO_TEST_CASE(text_model_and_dataset_must_agree) {
  Scratch scratch("compat-text");
  const data::DatasetReader dataset(write_tiny_dataset(scratch / "data.h5"));
  BOOST_CHECK_EQUAL(check(distilbert(kVocab, 32, kLabels), dataset), "");
  std::string error = check(distilbert(kVocab - 1, 32, kLabels), dataset);
  BOOST_CHECK(contains(error, "MODEL: vocab_size 39 is smaller than the tokenizer of"));
  error = check(distilbert(kVocab, 8, kLabels), dataset);  // tiny_examples are up to 10 tokens long
  BOOST_TEST_INFO(error);
  BOOST_CHECK(contains(error, (scratch / "data.h5").string() + ":/train example"));
  BOOST_CHECK(contains(error, "MODEL has max_position_embeddings 8"));
  error = check(distilbert(kVocab, 32, 2), dataset);
  BOOST_CHECK(contains(error, "has 3 labels but the model in MODEL has 2"));
  BOOST_CHECK_EQUAL(check(distilbert(kVocab, 32, 2), dataset, /*labels=*/false), "");  // train: labels from the data
  error = check({{"model_type", "hpctrain-cnn"}}, dataset);
  BOOST_CHECK(contains(error, "model_type 'hpctrain-cnn' is not a text model"));
}

BOOST_AUTO_TEST_CASE(bert_needs_two_token_types_for_pairs) {
  Scratch scratch("compat-pairs");
  const data::DatasetReader dataset(write_pair_dataset(scratch / "pairs.h5"));
  nlohmann::json bert = {{"model_type", "bert"},   {"vocab_size", kVocab},     {"hidden_size", 16},
                         {"num_hidden_layers", 1}, {"num_attention_heads", 2}, {"intermediate_size", 32},
                         {"type_vocab_size", 1},   {"num_labels", 3}};
  const auto run = [&] {
    train::check_model_fits_dataset(io::HfConfig::from_json(bert), "MODEL", dataset, {"train"}, true);
  };
  BOOST_CHECK(
      contains(error_message(run), "stores token_type_ids 0 and 1 (sentence pairs) but MODEL has type_vocab_size 1"));
  bert["type_vocab_size"] = 2;
  BOOST_CHECK_EQUAL(error_message(run), "");
}

BOOST_AUTO_TEST_CASE(non_finite_weights_name_the_tensor) {
  auto model = models::from_config(io::HfConfig::from_json(distilbert(kVocab, 32, kLabels)));
  BOOST_CHECK_EQUAL(error_message([&] { train::check_finite_weights(*model, "MODEL"); }), "");
  {
    at::NoGradGuard no_grad;
    model->named_parameters()["classifier.bias"][1] = std::numeric_limits<float>::quiet_NaN();
  }
  const std::string error = error_message([&] { train::check_finite_weights(*model, "MODEL"); });
  BOOST_CHECK(contains(error, "MODEL: tensor 'classifier.bias' holds 1 NaN/Inf value(s) of 3"));
}

BOOST_AUTO_TEST_CASE(non_finite_logits_fail_evaluate_and_predict) {
  Scratch scratch("compat-logits");
  const fs::path data_file = write_tiny_dataset(scratch / "data.h5");
  auto model = models::from_config(io::HfConfig::from_json(distilbert(kVocab, 32, kLabels)));
  {
    at::NoGradGuard no_grad;
    // Finite weights whose logits overflow: every pooled feature is about 1000, times 3e38.
    model->named_parameters()["pre_classifier.bias"].fill_(1000.0f);
    model->named_parameters()["classifier.weight"].fill_(3e38f);
  }
  auto comm = dist::make_single_process_comm();
  loader::LoaderOptions options;
  options.split = "validation", options.batch_size = 4, options.shuffle = data::ShuffleMode::none;
  loader::ShardLoader loader(data_file, options);
  std::string error = error_message([&] { (void)train::evaluate(*model, loader, *comm, at::kCPU); });
  BOOST_TEST_INFO(error);
  BOOST_CHECK(contains(error, "evaluation: the model gave NaN/Inf logits for"));
  BOOST_CHECK(contains(error, "for 10 example(s) of the split (the first is example 0)"));
  error = error_message([&] { (void)train::predict(*model, loader, *comm, at::kCPU); });
  BOOST_CHECK(contains(error, "prediction: the model gave NaN/Inf logits for"));
}

BOOST_AUTO_TEST_SUITE_END()
