// Note [Model FLOPs] (models/model_flops.hpp): 6 N + 12 L d T for full training; a frozen weight (LoRA's base)
// counts 4, an adapter's weight outside N 6; weight_gradients() reads the split off a LoRA model.
#include "fixtures.hpp"

#include "hpctrain/models/lora.hpp"
#include "hpctrain/models/model_flops.hpp"

#include <boost/test/unit_test.hpp>

namespace hpctrain::models {
namespace {

// GPT-2, d 32, 2 layers, vocabulary 100: N = L (4 d^2 + 2 d 4d) + V d (the tied head), attention width d.
io::HfConfig flops_gpt2_config() {
  return io::HfConfig::from_json({{"model_type", "gpt2"}, {"vocab_size", 100}, {"n_embd", 32}, {"n_layer", 2},
                                  {"n_head", 2}, {"n_positions", 32}});
}
constexpr double kGpt2N = 2 * (4 * 32 * 32 + 2 * 32 * 128) + 100 * 32;

}  // namespace

BOOST_AUTO_TEST_SUITE(model_flops)

BOOST_AUTO_TEST_CASE(full_training_counts_6n_plus_attention) {
  const double context = 16;
  const auto full = training_flops_per_token(flops_gpt2_config(), context);
  BOOST_REQUIRE(full.has_value());
  BOOST_TEST(*full == 6 * kGpt2N + 12 * 2 * 32 * context);
}

BOOST_AUTO_TEST_CASE(frozen_weights_count_4_and_adapters_6) {
  const double context = 16, attention = 12 * 2 * 32 * context;
  WeightGradients lora;
  lora.trainable_in_base = 0;
  lora.outside_base = 1000;
  BOOST_TEST(*training_flops_per_token(flops_gpt2_config(), context, lora) == 4 * kGpt2N + 6 * 1000 + attention);
  lora.trainable_in_base = 500;  // modules to save
  BOOST_TEST(*training_flops_per_token(flops_gpt2_config(), context, lora) ==
             4 * (kGpt2N - 500) + 6 * 500 + 6 * 1000 + attention);
  lora.trainable_in_base = 10 * kGpt2N;  // at most N
  lora.outside_base = 0;
  BOOST_TEST(*training_flops_per_token(flops_gpt2_config(), context, lora) == 6 * kGpt2N + attention);
}

BOOST_AUTO_TEST_CASE(weight_gradients_of_a_lora_model) {
  auto model = build_model(flops_gpt2_config());
  const WeightGradients full = weight_gradients(*model);
  BOOST_TEST(!full.trainable_in_base.has_value());
  BOOST_TEST(full.outside_base == 0.0);
  LoraConfig config;
  config.r = 4;
  config.target_modules = {"c_attn"};
  (void)apply_lora(*model, config);
  const WeightGradients lora = weight_gradients(*model);
  BOOST_REQUIRE(lora.trainable_in_base.has_value());
  BOOST_TEST(*lora.trainable_in_base == 0.0);                // no modules to save for a causal LM
  BOOST_TEST(lora.outside_base == 2 * (4 * 32 + 96 * 4.0));  // per layer: lora_A [r, d], lora_B [3d, r]

  auto classifier = testing::build({{"model_type", "distilbert"}, {"vocab_size", 100}, {"dim", 32}, {"n_layers", 1},
                                    {"n_heads", 4}, {"hidden_dim", 64}, {"max_position_embeddings", 64}, {"num_labels", 3}});
  LoraConfig heads;
  heads.r = 2;
  heads.modules_to_save = default_modules_to_save("SEQ_CLS");
  (void)apply_lora(*classifier, heads);
  const WeightGradients split = weight_gradients(*classifier);
  BOOST_TEST(*split.trainable_in_base == 32 * 32 + 3 * 32.0);  // pre_classifier and classifier weights
  BOOST_TEST(split.outside_base == 2 * (2 * 32 + 32 * 2.0));   // q_lin and v_lin of one layer
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace hpctrain::models
