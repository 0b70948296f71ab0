#include <boost/test/unit_test.hpp>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <string>
#include <utility>
#include <vector>

#include "hpctrain/core/error.hpp"
#include "hpctrain/optim/adamw.hpp"

using namespace hpctrain::optim;

BOOST_AUTO_TEST_SUITE(adamw)

// Reference values from torch.optim.AdamW (PyTorch 1.13), computed with
//   p = torch.tensor([1.0, -2.0], requires_grad=True); opt = torch.optim.AdamW([p], lr=0.1, weight_decay=0.01)
//   for g in ([0.5, -1.0], [0.25, 2.0], [-1.0, 0.5]): p.grad = torch.tensor(g); opt.step()
// (regenerate with tests/optim/adamw_reference.py).
BOOST_AUTO_TEST_CASE(matches_torch_adamw_over_three_steps) {
  at::Tensor p = at::tensor({1.0f, -2.0f}).set_requires_grad(true);
  AdamWOptions options;
  options.weight_decay = 0.01;
  AdamW optimizer({{"layer.weight", p}}, {}, options);
  const float grads[3][2] = {{0.5f, -1.0f}, {0.25f, 2.0f}, {-1.0f, 0.5f}};
  for (const auto& g : grads) {
    p.mutable_grad() = at::tensor({g[0], g[1]});
    optimizer.step(0.1);
  }
  const at::Tensor expected = at::tensor({0.8247138857841492f, -1.9723448753356934f});
  BOOST_TEST(at::allclose(p.detach(), expected, 1e-6, 1e-7), "got " << p);
  BOOST_TEST(optimizer.steps() == 3);
}

BOOST_AUTO_TEST_CASE(state_round_trip_and_strict_load) {
  at::Tensor p = at::ones({3}).set_requires_grad(true);
  AdamW a({{"w", p}}, {}, {});
  p.mutable_grad() = at::full({3}, 0.5f);
  a.step(0.01);
  const auto state = a.state_dict();
  at::Tensor q = at::ones({3}).set_requires_grad(true);
  AdamW b({{"w", q}}, {}, {});
  b.load_state_dict(state);
  BOOST_TEST(b.steps() == 1);
  BOOST_TEST(at::equal(b.state_dict().at("exp_avg.w"), state.at("exp_avg.w")));

  at::Tensor r = at::ones({4}).set_requires_grad(true);
  AdamW c({{"w", r}, {"v", at::ones({1})}}, {}, {});
  try {
    c.load_state_dict(state);
    BOOST_FAIL("expected an error");
  } catch (const hpctrain::Error& e) {
    const std::string message = e.what();
    BOOST_TEST(message.find("'exp_avg.w' has shape [3], expected [4]") != std::string::npos, message);
    BOOST_TEST(message.find("missing 'exp_avg.v'") != std::string::npos, message);
  }
}

namespace {

// Runs `steps` AdamW steps (weight decay on "w", none on "bias") from fixed random parameters and
// gradients; returns the parameters and both moments.
std::vector<at::Tensor> train_steps(at::ScalarType dtype, bool fused, int steps, bool transposed = false) {
  at::manual_seed(7);
  at::Tensor w = at::randn({37, 129}, dtype);
  if (transposed) w = w.t().contiguous().t();  // same values, column-major: not contiguous
  w.set_requires_grad(true);
  at::Tensor bias = at::randn({4099}, dtype).set_requires_grad(true);
  AdamWOptions options;
  options.weight_decay = 0.05;
  options.fused = fused;
  AdamW optimizer({{"layer.w", w}, {"layer.bias", bias}}, {"layer.bias"}, options);
  for (int step = 0; step < steps; ++step) {
    w.mutable_grad() = at::randn(w.sizes(), dtype) * (step + 1);
    bias.mutable_grad() = at::randn(bias.sizes(), dtype) * 1e-3;
    optimizer.step(1e-2 / (step + 1));
  }
  const auto state = optimizer.state_dict();
  return {w.detach().clone(), bias.detach().clone(), state.at("exp_avg.layer.w"), state.at("exp_avg_sq.layer.w"),
          state.at("exp_avg.layer.bias"), state.at("exp_avg_sq.layer.bias")};
}

}  // namespace

// Note [Fused AdamW]: the one-pass loop computes what the tensor operations compute. float64 leaves no
// room for rounding to hide a wrong formula; float32 may differ from the tensor kernels (which use FMA
// where the CPU has it) only by rounding.
BOOST_AUTO_TEST_CASE(fused_update_matches_tensor_operations) {
  for (const auto& [dtype, rtol, atol] : {std::tuple{at::kDouble, 1e-13, 1e-15}, std::tuple{at::kFloat, 2e-6, 1e-7}}) {
    const auto fused = train_steps(dtype, true, 5);
    const auto reference = train_steps(dtype, false, 5);
    for (std::size_t i = 0; i < fused.size(); ++i) {
      BOOST_TEST(at::allclose(fused[i], reference[i], rtol, atol),
                 "tensor " << i << " dtype " << c10::toString(dtype) << ": max difference "
                           << (fused[i] - reference[i]).abs().max().item<double>());
    }
    BOOST_TEST(!at::equal(fused[0], train_steps(dtype, true, 4)[0]));  // the steps did change something
  }
}

BOOST_AUTO_TEST_CASE(fused_update_is_the_same_for_any_thread_count_and_layout) {
  const int threads = at::get_num_threads();
  at::set_num_threads(1);
  const auto one = train_steps(at::kFloat, true, 3);
  at::set_num_threads(4);
  const auto four = train_steps(at::kFloat, true, 3);
  at::set_num_threads(threads);
  for (std::size_t i = 0; i < one.size(); ++i) BOOST_TEST(at::equal(one[i], four[i]), "tensor " << i);

  // A non-contiguous parameter takes the tensor operations: same values up to rounding.
  const auto strided = train_steps(at::kFloat, true, 3, /*transposed=*/true);
  BOOST_TEST(at::allclose(strided[0], one[0], 2e-6, 1e-7));
  BOOST_TEST(!strided[0].is_contiguous());
}

BOOST_AUTO_TEST_SUITE_END()
