// from_config initialization, dropout, losses, layer runners, dtypes, and the vision models.
#include "fixtures.hpp"

#include "hpctrain/core/error.hpp"
#include "hpctrain/models/bert.hpp"
#include "hpctrain/models/distilbert.hpp"
#include "hpctrain/models/registry.hpp"
#include "hpctrain/models/weights.hpp"

#include <boost/test/unit_test.hpp>
#include <torch/utils.h>
#include <ATen/core/grad_mode.h>

namespace hpctrain::models {
namespace {

using Json = nlohmann::json;

// Large enough for statistics, small enough to build in milliseconds.
Json bert_config() {
  return {{"model_type", "bert"},        {"vocab_size", 500},         {"hidden_size", 64},
          {"num_hidden_layers", 2},      {"num_attention_heads", 4},  {"intermediate_size", 128},
          {"max_position_embeddings", 64}, {"initializer_range", 0.05}, {"pad_token_id", 3},
          {"num_labels", 3}};
}

Json distilbert_config() {
  return {{"model_type", "distilbert"}, {"vocab_size", 500}, {"dim", 64}, {"n_layers", 2}, {"n_heads", 4},
          {"hidden_dim", 128}, {"max_position_embeddings", 64}, {"num_labels", 3}};
}

ModelInputs text_batch(int64_t batch, int64_t length) {
  ModelInputs inputs;
  inputs.input_ids = at::randint(4, 500, {batch, length}, at::kLong);
  inputs.attention_mask = at::ones({batch, length}, at::kLong);
  inputs.attention_mask.index_put_({1, at::indexing::Slice(length / 2, at::indexing::None)}, 0);
  return inputs;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

BOOST_AUTO_TEST_SUITE(initialization)

BOOST_AUTO_TEST_CASE(from_config_initializes_like_transformers) {
  for (const Json& config : {bert_config(), distilbert_config()}) {
    BOOST_TEST_CONTEXT(config.at("model_type")) {
      torch::manual_seed(11);
      const auto model = testing::build(config);
      const double std = config.value("initializer_range", 0.02);
      for (const auto& item : model->named_parameters()) {
        const std::string& name = item.key();
        const at::Tensor& p = item.value();
        BOOST_TEST_CONTEXT(name) {
          if (ends_with(name, "LayerNorm.weight") || ends_with(name, "layer_norm.weight")) {
            BOOST_TEST(at::all(p == 1).item<bool>());
          } else if (ends_with(name, ".bias")) {
            BOOST_TEST(at::all(p == 0).item<bool>());
          } else {
            at::Tensor values = p;
            if (ends_with(name, "word_embeddings.weight")) {
              const int64_t pad = config.value("pad_token_id", 0);
              BOOST_TEST(at::all(p[pad] == 0).item<bool>());  // padding row
              values = at::cat({p.slice(0, 0, pad), p.slice(0, pad + 1)});
            }
            const double sample_std = values.std().item<double>();
            BOOST_TEST(std::abs(sample_std - std) < 0.15 * std);
            BOOST_TEST(std::abs(values.mean().item<double>()) < 0.15 * std);
          }
        }
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(the_same_seed_gives_the_same_weights) {
  torch::manual_seed(5);
  const StateDict a = state_dict(*testing::build(bert_config()));
  torch::manual_seed(5);
  const StateDict b = state_dict(*testing::build(bert_config()));
  torch::manual_seed(6);
  const StateDict c = state_dict(*testing::build(bert_config()));
  for (const auto& [name, tensor] : a) BOOST_TEST(at::equal(tensor, b.at(name)));
  BOOST_TEST(!at::equal(a.at("classifier.weight"), c.at("classifier.weight")));
}

BOOST_AUTO_TEST_CASE(sinusoidal_positions_are_computed_and_frozen) {
  const Json& table = testing::golden().at("sinusoidal");
  Json config = distilbert_config();
  config["dim"] = table.at("dim");
  config["max_position_embeddings"] = table.at("n_pos");
  config["sinusoidal_pos_embds"] = true;
  const auto model = testing::build(config);
  const at::Tensor weight = model->named_parameters()["distilbert.embeddings.position_embeddings.weight"];
  const at::Tensor expected = testing::tensor_from_json(table.at("table"), at::kFloat);
  BOOST_TEST(testing::max_abs_diff(weight, expected) <= 1e-7);
  BOOST_TEST(!weight.requires_grad());
}

BOOST_AUTO_TEST_CASE(invalid_configs_are_errors) {
  Json heads = bert_config();
  heads["num_attention_heads"] = 5;
  BOOST_CHECK_THROW((void)testing::build(heads), Error);
  Json typed = bert_config();
  typed["hidden_size"] = "big";
  BOOST_CHECK_THROW((void)testing::build(typed), Error);
  Json relative = bert_config();
  relative["position_embedding_type"] = "relative_key";
  BOOST_CHECK_THROW((void)testing::build(relative), Error);
  Json activation = distilbert_config();
  activation["activation"] = "mish";
  BOOST_CHECK_THROW((void)testing::build(activation), Error);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(forward)

BOOST_AUTO_TEST_CASE(dropout_is_active_only_in_training) {
  for (const Json& config : {bert_config(), distilbert_config()}) {
    BOOST_TEST_CONTEXT(config.at("model_type")) {
      const auto model = testing::build(config);
      const ModelInputs inputs = text_batch(2, 10);
      at::NoGradGuard no_grad;
      model->train();
      const at::Tensor a = model->forward(inputs).logits;
      const at::Tensor b = model->forward(inputs).logits;
      BOOST_TEST(testing::max_abs_diff(a, b) > 1e-6);
      model->eval();
      BOOST_TEST(at::equal(model->forward(inputs).logits, model->forward(inputs).logits));
      // With every dropout probability 0, training mode computes what eval mode computes.
      Json no_dropout = config;
      for (const char* key : {"dropout", "attention_dropout", "seq_classif_dropout", "hidden_dropout_prob",
                              "attention_probs_dropout_prob"}) {
        no_dropout[key] = 0.0;
      }
      const auto plain = testing::build(no_dropout);
      (void)load_state_dict(*plain, state_dict(*model), "model");
      plain->train();
      BOOST_TEST(testing::max_abs_diff(plain->forward(inputs).logits, model->forward(inputs).logits) < 1e-6);
    }
  }
}

BOOST_AUTO_TEST_CASE(losses_follow_transformers) {
  const auto model = testing::build(bert_config());
  model->eval();
  ModelInputs inputs = text_batch(4, 6);
  inputs.labels = at::tensor(std::vector<int64_t>{0, 2, 1, 2});
  const ModelOutput out = model->forward(inputs);
  const at::Tensor expected = at::cross_entropy_loss(out.logits, inputs.labels);
  BOOST_TEST(out.loss.dim() == 0);
  BOOST_TEST(out.loss.item<double>() == expected.item<double>(), boost::test_tools::tolerance(1e-6));

  inputs.labels = at::rand({4, 3});  // floating labels, num_labels > 1: multi-label
  BOOST_TEST(model->forward(inputs).loss.item<double>() ==
                 at::binary_cross_entropy_with_logits(out.logits, inputs.labels).item<double>(),
             boost::test_tools::tolerance(1e-6));

  Json regression = bert_config();
  regression["num_labels"] = 1;
  const auto regressor = testing::build(regression);
  regressor->eval();
  inputs.labels = at::rand({4});
  const ModelOutput r = regressor->forward(inputs);
  BOOST_TEST(r.loss.item<double>() == at::mse_loss(r.logits.squeeze(), inputs.labels).item<double>(),
             boost::test_tools::tolerance(1e-6));

  Json single = bert_config();
  single["problem_type"] = "single_label_classification";
  inputs.labels = at::rand({4});
  BOOST_CHECK_THROW((void)testing::build(single)->forward(inputs), Error);
}

BOOST_AUTO_TEST_CASE(gradients_reach_every_trainable_parameter) {
  for (const Json& config : {bert_config(), distilbert_config()}) {
    const auto model = testing::build(config);
    ModelInputs inputs = text_batch(3, 8);
    inputs.labels = at::tensor(std::vector<int64_t>{0, 1, 2});
    model->forward(inputs).loss.backward();
    for (const auto& item : model->named_parameters()) {
      BOOST_TEST_CONTEXT(item.key()) {
        BOOST_TEST(item.value().grad().defined());
        // The padding row of the word embeddings never gets a gradient (padding_idx).
        if (!ends_with(item.key(), "word_embeddings.weight")) {
          BOOST_TEST(item.value().grad().abs().sum().item<double>() > 0);
        }
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(a_layer_runner_sees_every_layer) {
  const auto model = testing::build(distilbert_config());
  model->eval();
  const ModelInputs inputs = text_batch(2, 5);
  at::NoGradGuard no_grad;
  const at::Tensor direct = model->forward(inputs).logits;
  BOOST_TEST(model->transformer_layers().size() == 2u);
  int calls = 0;
  model->set_layer_runner([&](TransformerLayer& layer, const at::Tensor& hidden, const LayerContext& context) {
    ++calls;
    return layer.forward(hidden, context);
  });
  BOOST_TEST(at::equal(model->forward(inputs).logits, direct));
  BOOST_TEST(calls == 2);
}

// Nothing in forward assumes float32: the mask is built in the activations' dtype.
BOOST_AUTO_TEST_CASE(other_dtypes_run) {
  for (const Json& config : {bert_config(), distilbert_config()}) {
    BOOST_TEST_CONTEXT(config.at("model_type")) {
      const auto model = testing::build(config);
      model->eval();
      const ModelInputs inputs = text_batch(2, 7);
      at::NoGradGuard no_grad;
      const at::Tensor reference = model->forward(inputs).logits;
      model->to(at::kDouble);
      const at::Tensor in_double = model->forward(inputs).logits;
      BOOST_TEST(in_double.scalar_type() == at::kDouble);
      BOOST_TEST(testing::max_abs_diff(in_double, reference) < 1e-5);
      model->to(at::kBFloat16);
      const at::Tensor in_bf16 = model->forward(inputs).logits;
      BOOST_TEST(in_bf16.scalar_type() == at::kBFloat16);
      BOOST_TEST(testing::max_abs_diff(in_bf16, reference) < 0.05);
    }
  }
}

BOOST_AUTO_TEST_CASE(too_long_input_is_an_error) {
  const auto model = testing::build(bert_config());
  ModelInputs inputs;
  inputs.input_ids = at::ones({1, 65}, at::kLong);
  BOOST_CHECK_THROW((void)model->forward(inputs), Error);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(vision)

BOOST_AUTO_TEST_CASE(cnn_names_and_shapes) {
  const auto model = testing::build({{"model_type", "hpctrain-cnn"}, {"in_channels", 1}, {"image_size", 28},
                                     {"conv_channels", {32, 64}}, {"hidden", {128}}, {"num_labels", 10},
                                     {"dropout", 0.25}});
  std::vector<std::pair<std::string, std::vector<int64_t>>> params;
  for (const auto& item : model->named_parameters()) {
    params.emplace_back(item.key(), item.value().sizes().vec());
  }
  const std::vector<std::pair<std::string, std::vector<int64_t>>> expected{
      {"features.0.weight", {32, 1, 3, 3}}, {"features.0.bias", {32}},
      {"features.3.weight", {64, 32, 3, 3}}, {"features.3.bias", {64}},
      {"classifier.0.weight", {128, 64 * 7 * 7}}, {"classifier.0.bias", {128}},
      {"classifier.3.weight", {10, 128}}, {"classifier.3.bias", {10}}};
  BOOST_TEST(params.size() == expected.size());
  for (std::size_t i = 0; i < std::min(params.size(), expected.size()); ++i) {
    BOOST_TEST(params[i].first == expected[i].first);
    BOOST_TEST(params[i].second == expected[i].second);
  }
  ModelInputs inputs;
  inputs.pixel_values = at::rand({5, 1, 28, 28});
  inputs.labels = at::randint(0, 10, {5}, at::kLong);
  const ModelOutput out = model->forward(inputs);
  BOOST_TEST(out.logits.sizes() == at::IntArrayRef({5, 10}));
  BOOST_TEST(out.loss.defined());
  // Dropout only in training.
  model->eval();
  BOOST_TEST(at::equal(model->forward(inputs).logits, model->forward(inputs).logits));
  inputs.pixel_values = at::rand({5, 3, 28, 28});
  BOOST_CHECK_THROW((void)model->forward(inputs), Error);
}

BOOST_AUTO_TEST_CASE(mlp_names_and_shapes) {
  const auto model = testing::build(
      {{"model_type", "hpctrain-mlp"}, {"in_channels", 1}, {"image_size", 28}, {"hidden", {64, 32}}, {"num_labels", 10}});
  std::vector<std::string> names;
  for (const auto& item : model->named_parameters()) names.push_back(item.key());
  const std::vector<std::string> expected{"classifier.0.weight", "classifier.0.bias", "classifier.3.weight",
                                          "classifier.3.bias",   "classifier.6.weight", "classifier.6.bias"};
  BOOST_TEST(names == expected, boost::test_tools::per_element());
  BOOST_TEST(model->named_parameters()["classifier.0.weight"].sizes() == at::IntArrayRef({64, 784}));
  ModelInputs inputs;
  inputs.pixel_values = at::rand({2, 1, 28, 28});
  BOOST_TEST(model->forward(inputs).logits.sizes() == at::IntArrayRef({2, 10}));
  BOOST_TEST(model->transformer_layers().empty());
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace
}  // namespace hpctrain::models
