// AdamW8bit (adamw_8bit.hpp): each step equals an exact AdamW step (a float64 reference written here from
// Loshchilov & Hutter's algorithm) within the quantization bound of each block, any thread count gives the
// same bits, state round-trips and is a quarter of AdamW's.
#include <boost/test/unit_test.hpp>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/core/grad_mode.h>

#include <cmath>
#include <filesystem>

#include "../error_capture.hpp"
#include "hpctrain/models/tensor_io.hpp"
#include "hpctrain/optim/adamw.hpp"
#include "hpctrain/optim/adamw_8bit.hpp"
#include "quant_bounds.hpp"

using namespace hpctrain;
using namespace hpctrain::optim;

namespace {

constexpr double kLr = 1e-2, kDecay = 0.05;
const std::set<std::string> kNoDecay8bit = {"layer.bias"};  // Trainer's no-decay group: the bias

// "layer.weight" [40, 129] = 5,160 elements (8-bit state: 21 blocks, the last of 40) and "layer.bias" [129]
// (under min_8bit_size: float32 state), as fresh leaf tensors from a fixed seed.
NamedParameters make_parameters() {
  at::manual_seed(3);
  return {{"layer.weight", at::randn({40, 129}).set_requires_grad(true)},
          {"layer.bias", at::randn({129}).set_requires_grad(true)}};
}

void set_gradients(const NamedParameters& params, int step) {
  at::manual_seed(100 + step);
  for (const auto& [name, p] : params) p.mutable_grad() = at::randn(p.sizes()) * (0.1 * step);
}

AdamW8bit make_8bit(const NamedParameters& params) { return AdamW8bit(weight_decay_groups(params, kDecay, kNoDecay8bit), {}); }

// AdamW in float64 from the paper: m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2;
// p = p (1 - lr wd) - lr m / (1 - b1^t) / (sqrt(v / (1 - b2^t)) + eps).
struct Reference {
  at::Tensor p, m, v;
  void step(const at::Tensor& grad, int t, double wd) {
    const at::Tensor g = grad.to(at::kDouble);
    m = 0.9 * m + 0.1 * g;
    v = 0.999 * v + 0.001 * g * g;
    const double c1 = 1 - std::pow(0.9, t), c2 = 1 - std::pow(0.999, t);
    p = p * (1 - kLr * wd) - kLr * (m / c1) / ((v / c2).sqrt() + 1e-8);
  }
};

at::Tensor dequantized(const OptimizerState& state, const std::string& moment, const std::string& name) {
  const auto& q = moment == "exp_avg" ? quant::signed_dynamic() : quant::unsigned_dynamic();
  return quant::dequantize_blockwise(state.at(moment + "." + name), state.at(moment + "_absmax." + name), q);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(adamw_8bit)

// Every step, from the state the previous step left (dequantized): the float64 update gives the parameter
// (to float32 rounding) and the new moments within each block's quantization bound.
BOOST_AUTO_TEST_CASE(each_step_is_adamw_within_the_block_quantization_bound) {
  const NamedParameters params = make_parameters();
  const at::Tensor& w = params[0].second;
  AdamW8bit optimizer = make_8bit(params);
  Reference ref{w.detach().to(at::kDouble), at::zeros(w.sizes(), at::kDouble), at::zeros(w.sizes(), at::kDouble)};
  for (int t = 1; t <= 4; ++t) {
    set_gradients(params, t);
    ref.p = w.detach().to(at::kDouble);
    ref.step(w.grad(), t, kDecay);
    optimizer.step(kLr);
    const OptimizerState state = optimizer.state_dict();
    BOOST_TEST(state.at("exp_avg.layer.weight").scalar_type() == at::kByte);
    const at::Tensor step_error = (w.detach().to(at::kDouble) - ref.p).abs().max();
    BOOST_TEST(step_error.item<double>() < 1e-6 * (1 + w.abs().max().item<double>()), "step " << t);
    for (const auto& [moment, exact, code] : {std::tuple{"exp_avg", ref.m, quant::dynamic_map(true)},
                                             std::tuple{"exp_avg_sq", ref.v, quant::dynamic_map(false)}}) {
      const at::Tensor ours = dequantized(state, moment, "layer.weight");
      const at::Tensor absmax = state.at(std::string(moment) + "_absmax.layer.weight");
      BOOST_TEST(absmax.numel() == 21);
      BOOST_TEST(testing::outside_block_bounds(ours, exact, absmax, code) == 0, moment << " step " << t);
      BOOST_TEST(!at::equal(ours.to(at::kDouble), exact));  // the state really is rounded
    }
    // Continue from what the 8-bit state holds, as the next step does.
    ref.m = dequantized(state, "exp_avg", "layer.weight").to(at::kDouble);
    ref.v = dequantized(state, "exp_avg_sq", "layer.weight").to(at::kDouble);
  }
}

// Under min_8bit_size the state is float32 and the step is exactly AdamW's (same fused loop).
BOOST_AUTO_TEST_CASE(small_parameters_keep_float32_state_and_step_as_adamw) {
  const NamedParameters a = make_parameters(), b = make_parameters();
  AdamW8bit eight = make_8bit(a);
  AdamW adamw(weight_decay_groups(b, kDecay, kNoDecay8bit), AdamWOptions{});
  for (int t = 1; t <= 3; ++t) {
    set_gradients(a, t), set_gradients(b, t);
    eight.step(kLr), adamw.step(kLr);
  }
  BOOST_TEST(at::equal(a[1].second, b[1].second));
  BOOST_TEST(eight.state_dict().at("exp_avg_sq.layer.bias").scalar_type() == at::kFloat);
  BOOST_TEST(at::equal(eight.state_dict().at("exp_avg.layer.bias"), adamw.state_dict().at("exp_avg.layer.bias")));
  BOOST_TEST(eight.state_dict().count("exp_avg_absmax.layer.bias") == 0);
}

BOOST_AUTO_TEST_CASE(same_bits_for_any_thread_count) {
  auto run = [](int threads) {
    const int before = at::get_num_threads();
    at::set_num_threads(threads);
    at::manual_seed(9);
    const NamedParameters params = {{"big.weight", at::randn({300, 1000}).set_requires_grad(true)}};
    AdamW8bit optimizer = make_8bit(params);
    for (int t = 1; t <= 3; ++t) {
      set_gradients(params, t);
      optimizer.step(kLr);
    }
    at::set_num_threads(before);
    OptimizerState state = optimizer.state_dict();
    state["param"] = params[0].second.detach();
    return state;
  };
  const OptimizerState one = run(1), four = run(4);
  for (const auto& [name, tensor] : one) BOOST_TEST(at::equal(tensor, four.at(name)), name);
}

// State through optimizer.safetensors: stop after 2 steps, load into a fresh optimizer, step once more:
// the same bits as 3 uninterrupted steps. The file is at most 30 % of AdamW's (the goal).
BOOST_AUTO_TEST_CASE(state_round_trips_through_a_file_and_is_under_30_percent_of_adamw) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "hpctrain_adamw_8bit_test";
  std::filesystem::create_directories(dir);
  const NamedParameters straight = make_parameters(), resumed = make_parameters();
  AdamW8bit a = make_8bit(straight);
  for (int t = 1; t <= 3; ++t) set_gradients(straight, t), a.step(kLr);

  AdamW8bit first = make_8bit(resumed);
  for (int t = 1; t <= 2; ++t) set_gradients(resumed, t), first.step(kLr);
  models::save_tensor_file(dir / "optimizer.safetensors", first.state_dict());
  AdamW8bit second = make_8bit(resumed);
  second.load_state_dict(models::load_tensor_file(dir / "optimizer.safetensors"));
  BOOST_TEST(second.steps() == 2);
  set_gradients(resumed, 3), second.step(kLr);
  for (std::size_t i = 0; i < straight.size(); ++i) BOOST_TEST(at::equal(straight[i].second, resumed[i].second));

  // A DistilBERT-base-sized embedding and layer: state bytes, and the file sizes.
  const NamedParameters big = {{"word_embeddings.weight", at::zeros({30522, 768})},
                               {"lin1.weight", at::zeros({3072, 768})},
                               {"lin1.bias", at::zeros({3072})}};
  const AdamW8bit eight = make_8bit(big);
  const AdamW adamw(weight_decay_groups(big, 0.0, {"lin1.bias"}), AdamWOptions{});
  BOOST_TEST(eight.state_bytes() <= 0.30 * adamw.state_bytes(), eight.state_bytes() << " vs " << adamw.state_bytes());
  BOOST_TEST(eight.state_bytes() == AdamW8bit::state_bytes_for(30522 * 768, {}) + AdamW8bit::state_bytes_for(3072 * 768, {}) +
                                        AdamW8bit::state_bytes_for(3072, {}));
  models::save_tensor_file(dir / "eight.safetensors", eight.state_dict());
  models::save_tensor_file(dir / "adamw.safetensors", adamw.state_dict());
  const auto eight_file = std::filesystem::file_size(dir / "eight.safetensors");
  const auto adamw_file = std::filesystem::file_size(dir / "adamw.safetensors");
  BOOST_TEST(eight_file <= 0.30 * adamw_file, eight_file << " vs " << adamw_file);
  std::filesystem::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(strict_load_and_parameter_checks) {
  const NamedParameters params = make_parameters();
  AdamW8bit optimizer = make_8bit(params);
  OptimizerState state = optimizer.state_dict();
  state["exp_avg_absmax.layer.weight"] = at::zeros({20});
  state.erase("exp_avg_sq_absmax.layer.weight");
  const std::string message = testing::error_message([&] { optimizer.load_state_dict(state); });
  BOOST_TEST(testing::contains(message, "'exp_avg_absmax.layer.weight' has shape [20], expected [21]"), message);
  BOOST_TEST(testing::contains(message, "missing 'exp_avg_sq_absmax.layer.weight'"), message);

  const NamedParameters doubles = {{"w", at::zeros({8}, at::kDouble)}};
  const std::string dtype = testing::error_message([&] { (void)make_8bit(doubles); });
  BOOST_TEST(testing::contains(dtype, "parameter 'w' is cpu Double; expected a contiguous float32 tensor on the CPU"), dtype);
}

BOOST_AUTO_TEST_CASE(made_by_the_factory_under_both_names) {
  const NamedParameters params = make_parameters();
  for (const char* name : {"adamw_bnb_8bit", "adamw_8bit"}) {
    OptimizerOptions options;
    options.optim = name;
    const auto optimizer = make_optimizer(options, params, kNoDecay8bit);
    BOOST_TEST(optimizer->type() == "adamw_bnb_8bit");
    BOOST_TEST(optimizer->hyperparameters().at("min_8bit_size") == 4096);
    int64_t expected = 0;
    for (const auto& [n, p] : params) expected += optimizer_state_bytes(options, p.sizes().vec());
    BOOST_TEST(optimizer->state_bytes() == expected);
  }
}

BOOST_AUTO_TEST_SUITE_END()
