// Gradient checkpointing (models/checkpointing.hpp): the same gradients as the plain forward with dropout
// on, for DistilBERT and BERT, through the gradient reducer's hooks, and less activation memory.
#include "counting_allocator.hpp"
#include "fixtures.hpp"

#include "hpctrain/ddp/gradient_reducer.hpp"
#include "hpctrain/models/checkpointing.hpp"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <boost/test/unit_test.hpp>
#include <torch/utils.h>

#include <map>
#include <string>

namespace hpctrain::models {
namespace {

using Json = nlohmann::json;

Json distilbert_config(int64_t layers = 2, int64_t dim = 32) {
  return {{"model_type", "distilbert"}, {"vocab_size", 200}, {"dim", dim}, {"n_layers", layers}, {"n_heads", 4},
          {"hidden_dim", 4 * dim}, {"max_position_embeddings", 128}, {"num_labels", 3}, {"dropout", 0.1},
          {"attention_dropout", 0.1}};
}

Json bert_config() {
  return {{"model_type", "bert"}, {"vocab_size", 200}, {"hidden_size", 32}, {"num_hidden_layers", 2},
          {"num_attention_heads", 4}, {"intermediate_size", 64}, {"max_position_embeddings", 64},
          {"num_labels", 3}, {"hidden_dropout_prob", 0.1}, {"attention_probs_dropout_prob", 0.1}};
}

ModelInputs text_batch(int64_t batch, int64_t length) {
  ModelInputs inputs;
  inputs.input_ids = at::randint(4, 200, {batch, length}, at::kLong);
  inputs.attention_mask = at::ones({batch, length}, at::kLong);
  inputs.attention_mask.index_put_({1, at::indexing::Slice(length / 2, at::indexing::None)}, 0);
  inputs.labels = at::randint(0, 3, {batch}, at::kLong);
  return inputs;
}

using Gradients = std::map<std::string, at::Tensor>;

// Seeds, runs forward and backward of `inputs` (dropout on), returns every parameter's gradient.
Gradients gradients_of(SequenceClassifier& model, const ModelInputs& inputs, uint64_t seed) {
  for (auto& p : model.parameters()) p.mutable_grad() = at::Tensor();
  torch::manual_seed(seed);
  model.forward(inputs).loss.backward();
  Gradients out;
  for (const auto& item : model.named_parameters()) {
    if (item.value().grad().defined()) out.emplace(item.key(), item.value().grad().clone());
  }
  return out;
}

// Every gradient of `b` equals `a`'s within `tolerance` of the tensor's largest magnitude.
void check_same_gradients(const Gradients& a, const Gradients& b, double tolerance) {
  BOOST_TEST(a.size() == b.size());
  for (const auto& [name, grad] : a) {
    BOOST_TEST_CONTEXT(name) {
      BOOST_TEST_REQUIRE(b.count(name) == 1u);
      const double scale = std::max(grad.abs().max().item<double>(), 1e-30);
      BOOST_TEST((grad - b.at(name)).abs().max().item<double>() <= tolerance * scale);
    }
  }
}

BOOST_AUTO_TEST_SUITE(gradient_checkpointing)

BOOST_AUTO_TEST_CASE(gradients_equal_the_plain_run_with_dropout) {
  for (const Json& config : {distilbert_config(), bert_config()}) {
    BOOST_TEST_CONTEXT(config.at("model_type")) {
      torch::manual_seed(1);
      const auto model = testing::build(config);
      model->train();
      const ModelInputs inputs = text_batch(4, 12);
      const Gradients plain = gradients_of(*model, inputs, 7);
      const at::Tensor next_plain = at::randn({4});  // the generator after a plain step
      BOOST_TEST(!at::equal(plain.begin()->second, gradients_of(*model, inputs, 8).begin()->second));  // dropout is on

      set_gradient_checkpointing(*model, true);
      const Gradients checkpointed = gradients_of(*model, inputs, 7);
      check_same_gradients(plain, checkpointed, 1e-6);
      BOOST_TEST(at::equal(at::randn({4}), next_plain));  // the recomputation left the generator as it found it
    }
  }
}

// Evaluation (no autograd recording) runs the layers directly: the same logits, nothing recomputed.
BOOST_AUTO_TEST_CASE(evaluation_is_unchanged) {
  torch::manual_seed(2);
  const auto model = testing::build(distilbert_config());
  model->eval();
  const ModelInputs inputs = text_batch(3, 10);
  at::NoGradGuard no_grad;
  const at::Tensor plain = model->forward(inputs).logits;
  set_gradient_checkpointing(*model, true);
  BOOST_TEST(at::equal(model->forward(inputs).logits, plain));
}

// The reducer's hooks fire during the recomputation's backward (overlap on, several buckets), also for
// accumulated no-sync micro-batches: every parameter reports a gradient and the averages are the plain ones.
BOOST_AUTO_TEST_CASE(the_reducer_sees_every_gradient_during_recomputation) {
  const auto comm = dist::make_single_process_comm();
  Gradients results[2];
  for (int checkpointing = 0; checkpointing < 2; ++checkpointing) {
    torch::manual_seed(3);
    const auto model = testing::build(bert_config());
    model->train();
    set_gradient_checkpointing(*model, checkpointing == 1);
    ddp::NamedTensors named;
    for (const auto& item : model->named_parameters()) named.emplace_back(item.key(), item.value());
    ddp::ReducerOptions options;
    options.first_bucket_bytes = 4096, options.bucket_bytes = 16384, options.overlap = true;
    ddp::GradientReducer reducer(*comm, named, options);
    BOOST_TEST_REQUIRE(reducer.overlap());
    BOOST_TEST_REQUIRE(reducer.buckets().size() > 3u);
    for (int micro = 0; micro < 2; ++micro) {
      reducer.set_sync(micro == 1);
      torch::manual_seed(10 + micro);
      model->forward(text_batch(4, 12)).loss.backward();
      BOOST_TEST(reducer.finalize().empty());
    }
    BOOST_TEST(reducer.unused_parameters().empty());
    for (const auto& item : model->named_parameters()) results[checkpointing].emplace(item.key(), item.value().grad().clone());
  }
  check_same_gradients(results[0], results[1], 1e-6);
}

// Note [Layer checkpointing]: forward keeps one [B, L, D] input per layer instead of every layer's
// intermediate tensors; the peak of forward + backward drops with it.
BOOST_AUTO_TEST_CASE(keeps_less_activation_memory) {
  torch::manual_seed(4);
  const auto model = testing::build(distilbert_config(4, 64));
  model->train();
  const ModelInputs inputs = text_batch(8, 128);
  size_t kept[2], peak[2];
  for (int checkpointing = 0; checkpointing < 2; ++checkpointing) {
    set_gradient_checkpointing(*model, checkpointing == 1);
    for (auto& p : model->parameters()) p.mutable_grad() = at::Tensor();
    peak[checkpointing] = testing::peak_bytes_during([&] {
      ModelOutput out;
      kept[checkpointing] = testing::bytes_kept_by([&] { out = model->forward(inputs); });
      out.loss.backward();
    });
  }
  BOOST_TEST_MESSAGE("activation bytes kept by forward: plain " << kept[0] << ", checkpointed " << kept[1]
                     << "; peak of forward + backward: plain " << peak[0] << ", checkpointed " << peak[1]);
  const size_t layer_input = 8 * 128 * 64 * sizeof(float);  // 256 KiB
  BOOST_TEST(kept[0] > 4 * 6 * layer_input);  // the measurement sees the plain layers' activations
  BOOST_TEST(kept[1] < 4 * 2 * layer_input);  // one input per layer, plus embeddings and head
  BOOST_TEST(peak[1] < peak[0] * 6 / 10);
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace
}  // namespace hpctrain::models
