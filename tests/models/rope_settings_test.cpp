// The rotary settings of Llama/Qwen2 config.json files as transformers 5.24 reads them (Note [Rope settings] in
// src/io/causal_lm_config.cpp): each case of tests/io/golden/rope_settings.json (made by make_rope_goldens.py with
// transformers itself) reads to transformers' values or is refused naming the field, and a checkpoint whose file
// has both rope_parameters and rope_scaling computes transformers' logits.
#include "fixtures.hpp"
#include "../error_capture.hpp"

#include "hpctrain/io/hf_config.hpp"
#include "hpctrain/models/pretrained.hpp"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <boost/test/unit_test.hpp>

#include <filesystem>
#include <fstream>
#include <string>

namespace hpctrain::models {
namespace {

namespace fs = std::filesystem;

const nlohmann::json& rope_golden() {
  static const nlohmann::json data =
      testing::read_json(fs::path(HPCTRAIN_TEST_DATA_DIR) / "io" / "golden" / "rope_settings.json");
  return data;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(rope_settings)

BOOST_AUTO_TEST_CASE(config_files_read_as_transformers_reads_them) {
  for (const auto& [name, golden] : rope_golden().at("cases").items()) {
    BOOST_TEST_CONTEXT(name) {
      nlohmann::json object = rope_golden().at("base");
      object.update(golden.at("config"));
      if (golden.contains("error")) {  // transformers' KeyError names the missing key: so do we, with the file
        const std::string missing = name == "linear_without_factor" ? "'factor'" : "'high_freq_factor'";
        const std::string message =
            hpctrain::testing::error_message([&] { (void)io::HfConfig::from_json(object, "case/config.json"); });
        BOOST_TEST(message.find("case/config.json") != std::string::npos, message);
        BOOST_TEST(message.find(missing) != std::string::npos, message);
        continue;
      }
      const io::HfConfig config = io::HfConfig::from_json(object, "case/config.json");
      const io::RopeConfig& rope = config.llama().rope;
      const nlohmann::json& want = golden.at("rope");
      BOOST_TEST(rope.type == want.at("rope_type").get<std::string>());
      BOOST_TEST(rope.theta == want.at("rope_theta").get<double>());
      BOOST_TEST(rope.factor == want.value("factor", 1.0));
      if (rope.type == "llama3") {
        BOOST_TEST(rope.low_freq_factor == want.at("low_freq_factor").get<double>());
        BOOST_TEST(rope.high_freq_factor == want.at("high_freq_factor").get<double>());
        BOOST_TEST(rope.original_max_position_embeddings == want.at("original_max_position_embeddings").get<int64_t>());
      }
      // Saved and read again: the same settings (the spelling read is kept).
      const io::RopeConfig again = io::HfConfig::from_json(config.to_json(), "saved").llama().rope;
      BOOST_TEST(again.type == rope.type);
      BOOST_TEST(again.theta == rope.theta);
      BOOST_TEST(again.factor == rope.factor);
    }
  }
  const std::string unknown = hpctrain::testing::error_message([] {
    (void)io::HfConfig::from_json({{"model_type", "qwen2"}, {"rope_scaling", {{"rope_type", "banana"}}}}, "q/config.json");
  });
  BOOST_TEST(unknown.find("q/config.json") != std::string::npos, unknown);
  BOOST_TEST(unknown.find("rope_scaling.rope_type") != std::string::npos, unknown);
}

BOOST_AUTO_TEST_CASE(both_keys_give_transformers_logits) {
  const nlohmann::json& golden = rope_golden().at("logits");
  const fs::path folder = fs::temp_directory_path() / ("hpctrain-rope-both-" + std::to_string(::getpid()));
  fs::remove_all(folder);
  fs::create_directories(folder);
  nlohmann::json config = testing::read_json(testing::golden_dir() / "tiny-llama-tied" / "config.json");
  for (const char* key : {"rope_theta", "rope_scaling", "rope_parameters"}) config.erase(key);
  config.update(golden.at("config"));
  std::ofstream(folder / "config.json") << config.dump(2);
  fs::copy_file(testing::golden_dir() / "tiny-llama-tied" / "model.safetensors", folder / "model.safetensors");
  const Loaded<CausalLM> loaded = causal_lm_from_pretrained(folder);
  fs::remove_all(folder);
  loaded.model->eval();
  at::NoGradGuard no_grad;
  ModelInputs inputs;
  inputs.input_ids = at::tensor(golden.at("input_ids").get<std::vector<int64_t>>(), at::kLong).view({1, -1});
  const at::Tensor logits = loaded.model->forward(inputs).logits[0];
  const at::Tensor expected = testing::tensor_from_json(golden.at("logits"), at::kFloat);
  const double diff = testing::max_abs_diff(logits, expected);
  BOOST_TEST(diff < 1e-4, "max |logits - transformers| " << diff);
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace hpctrain::models
