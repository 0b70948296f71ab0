// Parameter counts from the config (Note [Size before building]) equal the built models', overflow and
// memory refusals name the fields, and /proc/meminfo parsing.
#include <boost/test/unit_test.hpp>

#include <chrono>

#include "../error_capture.hpp"
#include "hpctrain/core/error.hpp"
#include "hpctrain/core/memory_info.hpp"
#include "hpctrain/models/model_size.hpp"
#include "hpctrain/models/registry.hpp"

namespace hpctrain::models {
namespace {

using Json = nlohmann::json;
using hpctrain::testing::contains;
using hpctrain::testing::error_message;

int64_t built_parameters(const io::HfConfig& config) {
  int64_t total = 0;
  for (const auto& item : from_config(config)->named_parameters()) total += item.value().numel();
  return total;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(model_size)

BOOST_AUTO_TEST_CASE(estimates_equal_the_built_models) {
  const std::vector<Json> configs = {
      {{"model_type", "distilbert"},
       {"vocab_size", 120},
       {"dim", 32},
       {"n_layers", 3},
       {"n_heads", 4},
       {"hidden_dim", 48},
       {"max_position_embeddings", 40},
       {"num_labels", 5}},
      {{"model_type", "distilbert"},
       {"vocab_size", 50},
       {"dim", 16},
       {"n_layers", 1},
       {"n_heads", 2},
       {"hidden_dim", 8},
       {"sinusoidal_pos_embds", true}},
      {{"model_type", "bert"},
       {"vocab_size", 90},
       {"hidden_size", 24},
       {"num_hidden_layers", 2},
       {"num_attention_heads", 4},
       {"intermediate_size", 40},
       {"max_position_embeddings", 30},
       {"type_vocab_size", 3},
       {"num_labels", 4}},
      {{"model_type", "hpctrain-cnn"},
       {"in_channels", 3},
       {"image_size", 12},
       {"conv_channels", {4, 6}},
       {"hidden", {10}},
       {"num_labels", 7}},
      {{"model_type", "hpctrain-cnn"},
       {"in_channels", 1},
       {"image_size", 9},
       {"conv_channels", {5}},
       {"hidden", Json::array()}},
      {{"model_type", "hpctrain-mlp"}, {"in_channels", 2}, {"image_size", 5}, {"hidden", {7, 3}}, {"num_labels", 3}},
  };
  for (const Json& object : configs) {
    const io::HfConfig config = io::HfConfig::from_json(object);
    BOOST_TEST_INFO(object.dump());
    BOOST_CHECK_EQUAL(estimate_model_size(config).parameters, built_parameters(config));
  }
}

BOOST_AUTO_TEST_CASE(overflow_names_the_fields) {
  const auto config = io::HfConfig::from_json(
      {{"model_type", "distilbert"}, {"vocab_size", int64_t{1} << 60}, {"dim", 768}, {"n_heads", 12}});
  const std::string error = error_message([&] { (void)estimate_model_size(config); });
  BOOST_TEST_INFO(error);
  BOOST_CHECK(contains(error, "vocab_size x dim overflows int64"));
}

BOOST_AUTO_TEST_CASE(a_model_larger_than_the_memory_is_refused_with_fields_and_bytes) {
  const auto config = io::HfConfig::from_json({{"model_type", "distilbert"},
                                               {"vocab_size", 1000},
                                               {"dim", 64},
                                               {"n_heads", 4},
                                               {"n_layers", 2},
                                               {"hidden_dim", 128}});
  const ModelSize size = estimate_model_size(config);
  BOOST_CHECK_NO_THROW(check_model_fits(size, 1, size.bytes(4), "test", "cfg.json", "building the model"));
  const std::string error = error_message(
      [&] { check_model_fits(size, 4, size.bytes(4), "MemAvailable in /proc/meminfo", "cfg.json", "training"); });
  BOOST_TEST_INFO(error);
  BOOST_CHECK(contains(error, "cfg.json: the model has " + std::to_string(size.parameters) + " parameters"));
  BOOST_CHECK(contains(error, "largest: vocab_size 1000 x dim 64 = 64000 parameters"));
  BOOST_CHECK(contains(error, "(" + std::to_string(size.bytes(16)) + " bytes)"));
  BOOST_CHECK(contains(error, "MemAvailable in /proc/meminfo"));
  // Optimizer state beside the copies: it alone can tip the balance, and the message names it.
  BOOST_CHECK_NO_THROW(check_model_fits(size, 2, size.bytes(8), "test", "cfg.json", "training"));
  const std::string with_state = error_message(
      [&] { check_model_fits(size, 2, size.bytes(8), "test", "cfg.json", "training", /*extra_bytes=*/1); });
  BOOST_TEST_INFO(with_state);
  BOOST_CHECK(contains(with_state, "(2 fp32 copies + 0.00 GiB (1 bytes) of optimizer state)"));
}

// dim 10^9 (with 6 layers the count overflows int64): refused from the config in well under a second, before any tensor
// is allocated.
BOOST_AUTO_TEST_CASE(from_config_refuses_an_absurd_config_fast) {
  const auto config =
      io::HfConfig::from_json({{"model_type", "distilbert"}, {"dim", 1000000000}, {"n_heads", 8}}, "huge/config.json");
  const auto start = std::chrono::steady_clock::now();
  const std::string error = error_message([&] { (void)from_config(config); });
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  BOOST_TEST_INFO(error);
  BOOST_CHECK(
      contains(error, "huge/config.json: n_layers 6 x 4 attention projections (dim 1000000000 x dim) overflows int64"));
  BOOST_CHECK_LT(seconds, 0.5);
}

BOOST_AUTO_TEST_CASE(meminfo_is_parsed_in_bytes) {
  BOOST_CHECK_EQUAL(
      core::parse_mem_available("MemTotal:  100 kB\nMemFree:  5 kB\nMemAvailable:   2048 kB\n").value_or(-1),
      2048 * 1024);
  BOOST_CHECK(!core::parse_mem_available("MemTotal: 100 kB\n").has_value());
  const auto available = core::available_host_memory();
  BOOST_REQUIRE(available.has_value());  // Linux: /proc/meminfo is always there
  BOOST_CHECK_GT(available->bytes, 0);
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace hpctrain::models
