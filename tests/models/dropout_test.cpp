// Counter-based dropout (src/models/dropout.cpp): statistics, reproducibility, gradient, thread-independence.
#include "models/dropout.hpp"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/autograd.h>
#include <torch/utils.h>

#include <boost/test/unit_test.hpp>

#include <cmath>

namespace hpctrain::models::detail {
namespace {

BOOST_AUTO_TEST_SUITE(counter_based_dropout)

BOOST_AUTO_TEST_CASE(zeroes_a_share_p_and_scales_the_rest) {
  torch::manual_seed(1);
  const at::Tensor x = at::rand({200, 500}) + 1;  // no zeros of its own
  const double p = 0.1;
  const at::Tensor y = seeded_dropout(x, p, /*training=*/true);
  const at::Tensor dropped = y == 0;
  BOOST_TEST(std::abs(dropped.to(at::kDouble).mean().item<double>() - p) < 0.005);  // 100,000 draws
  BOOST_TEST(at::allclose(y.masked_select(~dropped), x.masked_select(~dropped) / (1 - p)));
  BOOST_TEST(seeded_dropout(x, p, /*training=*/false).is_same(x));
  BOOST_TEST(seeded_dropout(x, 0.0, /*training=*/true).is_same(x));
  BOOST_TEST(seeded_dropout(x, 1.0, /*training=*/true).abs().sum().item<double>() == 0);  // as at::dropout
}

BOOST_AUTO_TEST_CASE(the_seed_decides_the_mask_whatever_the_threads) {
  const at::Tensor x = at::ones({1000, 33});
  const int threads = at::get_num_threads();
  at::set_num_threads(1);
  torch::manual_seed(7);
  const at::Tensor one_thread = seeded_dropout(x, 0.5, true);
  const at::Tensor next_call = seeded_dropout(x, 0.5, true);
  at::set_num_threads(4);
  torch::manual_seed(7);
  const at::Tensor four_threads = seeded_dropout(x, 0.5, true);
  at::set_num_threads(threads);
  BOOST_TEST(at::equal(one_thread, four_threads));
  BOOST_TEST(!at::equal(one_thread, next_call));
}

// Backward redraws the mask from the seed: the gradient is the mask the forward applied.
BOOST_AUTO_TEST_CASE(backward_applies_the_forward_mask) {
  torch::manual_seed(3);
  const at::Tensor x = at::randn({17, 9}, at::kDouble).requires_grad_(true);
  const at::Tensor weight = at::randn({17, 9}, at::kDouble);
  const at::Tensor y = seeded_dropout(x, 0.3, true);
  const at::Tensor grad = torch::autograd::grad({(y * weight).sum()}, {x})[0];
  const at::Tensor mask_times_scale = y.detach() / x.detach();  // 0 or 1 / (1 - p)
  BOOST_TEST(at::allclose(grad, weight * mask_times_scale));
  // Non-contiguous input: same values as on a contiguous copy with the same seed.
  const at::Tensor t = at::randn({9, 17}).t();
  torch::manual_seed(4);
  const at::Tensor from_view = seeded_dropout(t, 0.3, true);
  torch::manual_seed(4);
  BOOST_TEST(at::equal(from_view, seeded_dropout(t.contiguous(), 0.3, true)));
}

BOOST_AUTO_TEST_CASE(half_precision_and_double_work) {
  for (const auto dtype : {at::kBFloat16, at::kHalf, at::kDouble}) {
    torch::manual_seed(5);
    const at::Tensor x = at::ones({64, 64}, dtype);
    const at::Tensor y = seeded_dropout(x, 0.25, true);
    BOOST_TEST(y.scalar_type() == dtype);
    const double kept = (y != 0).to(at::kDouble).mean().item<double>();
    BOOST_TEST(std::abs(kept - 0.75) < 0.03);
    BOOST_TEST(std::abs(y.to(at::kDouble).max().item<double>() - 1 / 0.75) < 0.01);
  }
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace
}  // namespace hpctrain::models::detail
