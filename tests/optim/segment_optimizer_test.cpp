// make_segment_optimizer / segment_alignment (Note [ZeRO slices] in src/dist/zero_slices.cpp): an optimizer
// over segments of a parameter (the views a ZeRO rank updates) equals the optimizer over the whole parameter
// bit for bit when every cut is a multiple of segment_alignment: AdamW and SGD on any cut, 8-bit AdamW on
// block boundaries (a cut inside a block gives other codes); Adafactor is refused naming both options.
#include <boost/test/unit_test.hpp>

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <string>
#include <vector>

#include "../error_capture.hpp"
#include "hpctrain/optim/optimizer.hpp"

using namespace hpctrain;
using namespace hpctrain::optim;

namespace {

// Whole-parameter updates and segment updates (cut at `cut`) of a [24, 300] weight (7,200 elements: 8-bit
// state) after three steps; returns the largest absolute difference of the weights.
double segment_difference(const OptimizerOptions& options, int64_t cut) {
  at::manual_seed(11);
  const at::Tensor start = at::randn({24, 300});
  at::Tensor whole = start.clone().set_requires_grad(true);
  at::Tensor sharded = start.clone().set_requires_grad(true);
  auto reference = make_optimizer(options, {{"layer.weight", whole}}, {});
  const at::Tensor flat = sharded.detach().view({-1});
  std::vector<at::Tensor> segments{flat.narrow(0, 0, cut), flat.narrow(0, cut, flat.numel() - cut)};
  std::vector<std::unique_ptr<Optimizer>> parts;
  for (const at::Tensor& segment : segments)
    parts.push_back(make_segment_optimizer(options, {{"decay", options.weight_decay, {{"layer.weight", segment}}}},
                                           {whole.numel()}));
  for (int step = 1; step <= 3; ++step) {
    at::manual_seed(100 + step);
    const at::Tensor grad = at::randn(start.sizes()) * (0.1 * step);
    whole.mutable_grad() = grad.clone();
    reference->step(1e-2);
    const at::Tensor grad_flat = grad.view({-1});
    segments[0].mutable_grad() = grad_flat.narrow(0, 0, cut).clone();
    segments[1].mutable_grad() = grad_flat.narrow(0, cut, grad_flat.numel() - cut).clone();
    for (auto& part : parts) part->step(1e-2);
  }
  return (whole.detach() - sharded.detach()).abs().max().item<double>();
}

OptimizerOptions segment_options(const std::string& optim) {
  OptimizerOptions options;
  options.optim = optim;
  options.weight_decay = 0.05;
  options.sgd_momentum = 0.9;
  return options;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(segment_optimizer)

BOOST_AUTO_TEST_CASE(alignment_is_the_block_for_quantized_parameters_only) {
  BOOST_TEST(segment_alignment(segment_options("adamw_8bit"), 4096) == 256);
  BOOST_TEST(segment_alignment(segment_options("adamw_8bit"), 4095) == 1);  // float32 state below min_8bit_size
  BOOST_TEST(segment_alignment(segment_options("adamw_torch"), 1 << 20) == 1);
  BOOST_TEST(segment_alignment(segment_options("sgd"), 1 << 20) == 1);
}

BOOST_AUTO_TEST_CASE(elementwise_optimizers_equal_the_whole_update_on_any_cut) {
  BOOST_TEST(segment_difference(segment_options("adamw_torch"), 1001) == 0.0);
  BOOST_TEST(segment_difference(segment_options("sgd"), 1001) == 0.0);
}

BOOST_AUTO_TEST_CASE(adamw_8bit_equals_the_whole_update_on_block_boundaries_only) {
  BOOST_TEST(segment_difference(segment_options("adamw_8bit"), 256 * 13) == 0.0);
  // A cut inside a block quantizes other blocks: the test above is not vacuous.
  BOOST_TEST(segment_difference(segment_options("adamw_8bit"), 256 * 13 + 100) > 0.0);
}

BOOST_AUTO_TEST_CASE(adafactor_is_refused_naming_both_options) {
  const at::Tensor weight = at::zeros({4, 4}).set_requires_grad(true);
  const std::string message = testing::error_message([&] {
    (void)make_segment_optimizer(segment_options("adafactor"), {{"decay", 0.0, {{"w", weight}}}}, {16});
  });
  BOOST_TEST(message.find("--optim adafactor with --zero-stage") != std::string::npos, message);
}

BOOST_AUTO_TEST_SUITE_END()
