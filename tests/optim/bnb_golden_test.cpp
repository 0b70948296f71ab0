// Goldens from the real bitsandbytes (tests/optim/golden/make_bnb_golden.py, bitsandbytes 0.50.2 CPU
// backend): its quantization maps, its blockwise (de)quantization and its AdamW8bit steps.
#include <boost/test/unit_test.hpp>

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <filesystem>

#include "hpctrain/models/tensor_io.hpp"
#include "hpctrain/optim/adamw_8bit.hpp"
#include "hpctrain/optim/blockwise_quant.hpp"
#include "quant_bounds.hpp"

using namespace hpctrain;
using namespace hpctrain::optim;

namespace {

const models::TensorMap& golden() {
  static const models::TensorMap tensors =
      models::load_tensor_file(std::filesystem::path(HPCTRAIN_TEST_DATA_DIR) / "optim/golden/bnb_8bit.safetensors");
  return tensors;
}

at::Tensor code_tensor(const quant::Code& code) { return at::tensor(std::vector<float>(code.begin(), code.end())); }

const at::Tensor& g(const std::string& name) { return golden().at(name); }

// bnb.optim.AdamW8bit([big, small], lr=1e-3, weight_decay=0.01): one group, decay on both.
struct Bnb {
  NamedParameters params{{"big", g("adamw.p0").clone().set_requires_grad(true)},
                         {"small", g("adamw.small.p0").clone().set_requires_grad(true)}};
  AdamW8bit optimizer{{ParameterGroup{"all", 0.01, params}}, AdamW8bitOptions{}};
  void step(int t) {
    params[0].second.mutable_grad() = g("adamw.g" + std::to_string(t));
    params[1].second.mutable_grad() = g("adamw.small.g" + std::to_string(t));
    optimizer.step(1e-3);
  }
};

// float32 AdamW against bitsandbytes' tensor kernels (which fuse multiply-adds): rounding only.
bool close(const at::Tensor& ours, const at::Tensor& theirs) { return at::allclose(ours, theirs, 1e-6, 2e-7); }

}  // namespace

BOOST_AUTO_TEST_SUITE(bnb_golden)

// create_dynamic_map(signed=True / False), value for value.
BOOST_AUTO_TEST_CASE(dynamic_maps_equal_bitsandbytes) {
  BOOST_TEST(at::equal(code_tensor(quant::dynamic_map(true)), golden().at("map.signed")));
  BOOST_TEST(at::equal(code_tensor(quant::dynamic_map(false)), golden().at("map.unsigned")));
}

// dequantize_blockwise of bitsandbytes' codes is the same multiplication; quantize_blockwise finds the same
// absmax and codes at least as near: bitsandbytes' CPU kernel searches the map approximately (its
// BinSearch picks a farther value for about one small value in ten), ours exactly.
BOOST_AUTO_TEST_CASE(blockwise_quantization_against_bitsandbytes) {
  const at::Tensor x = golden().at("quant.input");
  for (const auto& [name, q, values] : {std::tuple{"signed", &quant::signed_dynamic(), x},
                                        std::tuple{"unsigned", &quant::unsigned_dynamic(), x.abs()}}) {
    const std::string prefix = std::string("quant.") + name;
    const at::Tensor bnb_codes = golden().at(prefix + ".codes");
    const at::Tensor bnb_absmax = golden().at(prefix + ".absmax");
    BOOST_TEST(at::equal(quant::dequantize_blockwise(bnb_codes, bnb_absmax, *q), golden().at(prefix + ".dequant")), name);

    const quant::Quantized ours = quant::quantize_blockwise(values, *q);
    BOOST_TEST(at::equal(ours.absmax, bnb_absmax), name);
    const at::Tensor our_error = (quant::dequantize_blockwise(ours.codes, ours.absmax, *q) - values).abs();
    const at::Tensor bnb_error = (golden().at(prefix + ".dequant") - values).abs();
    BOOST_TEST(at::all(our_error <= bnb_error).item<bool>(), name);
    BOOST_TEST(at::any(our_error < bnb_error).item<bool>(), name);  // the approximate search does show
  }
}

// Step 1 from zero state: the same parameters and absmax; each moment within its block bound of the exact
// value and no farther from it than bitsandbytes' own rounding.
BOOST_AUTO_TEST_CASE(first_step_against_bitsandbytes_adamw8bit) {
  Bnb ours;
  ours.step(1);
  BOOST_TEST(close(ours.params[0].second.detach(), g("adamw.step1.p")));
  BOOST_TEST(close(ours.params[1].second.detach(), g("adamw.small.step1.p")));
  const OptimizerState state = ours.optimizer.state_dict();
  BOOST_TEST(close(state.at("exp_avg.small"), g("adamw.small.step1.state1")));
  BOOST_TEST(close(state.at("exp_avg_sq.small"), g("adamw.small.step1.state2")));
  const at::Tensor grad = g("adamw.g1").to(at::kDouble);
  for (const auto& [moment, index, exact, q] : {std::tuple{"exp_avg", "1", 0.1 * grad, &quant::signed_dynamic()},
                                                std::tuple{"exp_avg_sq", "2", 0.001 * grad * grad, &quant::unsigned_dynamic()}}) {
    const at::Tensor absmax = state.at(std::string(moment) + "_absmax.big");
    BOOST_TEST(close(absmax, g(std::string("adamw.step1.absmax") + index)), moment);
    const at::Tensor mine = quant::dequantize_blockwise(state.at(std::string(moment) + ".big"), absmax, *q);
    const at::Tensor theirs = quant::dequantize_blockwise(g(std::string("adamw.step1.state") + index),
                                                          g(std::string("adamw.step1.absmax") + index), *q);
    BOOST_TEST(testing::outside_block_bounds(mine, exact, absmax, q->code()) == 0, moment);
    const at::Tensor slack = 1e-6 * absmax.repeat_interleave(quant::kBlockSize).slice(0, 0, exact.numel());
    BOOST_TEST(at::all((mine - exact).abs() <= (theirs - exact).abs() + slack).item<bool>(), moment);
  }
}

// Step 2 from bitsandbytes' own state after step 1 (its codes and absmax loaded as our state): the same
// dequantization and update give its parameters and absmax.
BOOST_AUTO_TEST_CASE(second_step_from_bitsandbytes_state) {
  Bnb ours;
  {
    at::NoGradGuard no_grad;
    ours.params[0].second.copy_(g("adamw.step1.p"));
    ours.params[1].second.copy_(g("adamw.small.step1.p"));
  }
  ours.optimizer.load_state_dict({{"exp_avg.big", g("adamw.step1.state1")},
                                  {"exp_avg_absmax.big", g("adamw.step1.absmax1")},
                                  {"exp_avg_sq.big", g("adamw.step1.state2")},
                                  {"exp_avg_sq_absmax.big", g("adamw.step1.absmax2")},
                                  {"exp_avg.small", g("adamw.small.step1.state1")},
                                  {"exp_avg_sq.small", g("adamw.small.step1.state2")},
                                  {"step", at::scalar_tensor(1, at::kLong)}});
  ours.step(2);
  BOOST_TEST(close(ours.params[0].second.detach(), g("adamw.step2.p")));
  BOOST_TEST(close(ours.params[1].second.detach(), g("adamw.small.step2.p")));
  const OptimizerState state = ours.optimizer.state_dict();
  BOOST_TEST(close(state.at("exp_avg_absmax.big"), g("adamw.step2.absmax1")));
  BOOST_TEST(close(state.at("exp_avg_sq_absmax.big"), g("adamw.step2.absmax2")));
}

BOOST_AUTO_TEST_SUITE_END()
