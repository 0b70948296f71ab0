// SGD and Adafactor against the real libraries: torch.optim.SGD and transformers' Adafactor, four steps
// on fixed float32 parameters and gradients (golden/optimizer_goldens.safetensors, written by
// golden/make_optimizer_goldens.py). Each case is built through make_optimizer from the options the
// file's metadata records, so the --optim names and the option mapping are checked too.
#include <boost/test/unit_test.hpp>

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>

#include "hpctrain/io/safetensors.hpp"
#include "hpctrain/models/tensor_io.hpp"
#include "hpctrain/optim/optimizer.hpp"

using namespace hpctrain;
using namespace hpctrain::optim;

namespace {

const std::filesystem::path kGoldens =
    std::filesystem::path(HPCTRAIN_TEST_DATA_DIR) / "optim/golden/optimizer_goldens.safetensors";
const char* const kParameters[] = {"layer.weight", "layer.bias", "conv.weight"};
constexpr int kSteps = 4;

// OptimizerOptions from the generator's JSON (keys are OptimizerOptions' member names).
OptimizerOptions options_from(const nlohmann::json& j) {
  OptimizerOptions o;
  o.optim = j.at("optim").get<std::string>();
  o.weight_decay = j.value("weight_decay", 0.0);
  o.sgd_momentum = j.value("sgd_momentum", 0.0), o.sgd_dampening = j.value("sgd_dampening", 0.0);
  o.sgd_nesterov = j.value("sgd_nesterov", false);
  o.adafactor_beta1 = j.value("adafactor_beta1", 0.0);
  o.adafactor_clip_threshold = j.value("adafactor_clip_threshold", 1.0);
  o.adafactor_decay_rate = j.value("adafactor_decay_rate", -0.8);
  o.adafactor_relative_step = j.value("adafactor_relative_step", false);
  o.adafactor_scale_parameter = j.value("adafactor_scale_parameter", false);
  o.adafactor_warmup_init = j.value("adafactor_warmup_init", false);
  return o;
}

void check_case(const std::string& name, const nlohmann::json& spec, const models::TensorMap& golden) {
  BOOST_TEST_CONTEXT("case " << name) {
    NamedParameters named;
    for (const char* p : kParameters)
      named.emplace_back(p, golden.at(name + ".init." + p).clone().set_requires_grad(true));
    const auto optimizer = make_optimizer(options_from(spec), named, {"layer.bias"});
    BOOST_TEST(optimizer->type() == spec.at("optim").get<std::string>());
    const at::Tensor lrs = golden.at(name + ".lr");
    for (int k = 0; k < kSteps; ++k) {
      for (auto& [p, tensor] : named) tensor.mutable_grad() = golden.at(name + ".grad" + std::to_string(k) + "." + p);
      optimizer->step(lrs[k].item<double>());
    }
    for (const auto& [p, tensor] : named) {
      const at::Tensor expected = golden.at(name + ".final." + p);
      BOOST_TEST(at::allclose(tensor.detach(), expected, 1e-5, 1e-7),
                 p << ": max difference " << (tensor.detach() - expected).abs().max().item<double>());
      BOOST_TEST(!at::equal(tensor.detach(), golden.at(name + ".init." + p)), p << " did not move");
    }
    const OptimizerState state = optimizer->state_dict();
    const std::string prefix = name + ".state.";
    for (const auto& [key, expected] : golden) {
      if (key.rfind(prefix, 0) != 0) continue;
      const std::string ours = key.substr(prefix.size());
      BOOST_TEST_REQUIRE(state.count(ours) == 1, "no state tensor '" << ours << "'");
      BOOST_TEST(at::allclose(state.at(ours), expected, 1e-5, 1e-30),
                 ours << ": max difference " << (state.at(ours) - expected).abs().max().item<double>());
    }
  }
}

}  // namespace

BOOST_AUTO_TEST_SUITE(optimizer_goldens)

BOOST_AUTO_TEST_CASE(sgd_and_adafactor_match_torch_and_transformers) {
  const io::SafetensorsFile file(kGoldens);
  const nlohmann::json cases = nlohmann::json::parse(file.metadata().at("cases"));
  BOOST_TEST_MESSAGE("goldens from " << file.metadata().at("versions"));
  const models::TensorMap golden = models::load_tensor_file(kGoldens);
  int sgd = 0, adafactor = 0;
  for (const auto& [name, spec] : cases.items()) {
    check_case(name, spec, golden);
    (spec.at("optim") == "sgd" ? sgd : adafactor) += 1;
  }
  BOOST_TEST(sgd == 3);
  BOOST_TEST(adafactor == 4);
}

BOOST_AUTO_TEST_SUITE_END()
