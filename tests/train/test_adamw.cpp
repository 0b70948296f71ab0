#include <boost/test/unit_test.hpp>

#include <ATen/ATen.h>

#include "hpctrain/core/error.hpp"
#include "hpctrain/train/adamw.hpp"

using namespace hpctrain::train;

BOOST_AUTO_TEST_SUITE(adamw)

// Reference values from torch.optim.AdamW (PyTorch 1.13), computed with
//   p = torch.tensor([1.0, -2.0], requires_grad=True); opt = torch.optim.AdamW([p], lr=0.1, weight_decay=0.01)
//   for g in ([0.5, -1.0], [0.25, 2.0], [-1.0, 0.5]): p.grad = torch.tensor(g); opt.step()
// (regenerate with tests/train/adamw_reference.py).
BOOST_AUTO_TEST_CASE(matches_torch_adamw_over_three_steps) {
  at::Tensor p = at::tensor({1.0f, -2.0f}).set_requires_grad(true);
  AdamWOptions options;
  options.weight_decay = 0.01;
  AdamW optimizer({{"layer.weight", p}}, options);
  const float grads[3][2] = {{0.5f, -1.0f}, {0.25f, 2.0f}, {-1.0f, 0.5f}};
  for (const auto& g : grads) {
    p.mutable_grad() = at::tensor({g[0], g[1]});
    optimizer.step(0.1);
  }
  const at::Tensor expected = at::tensor({0.8247138857841492f, -1.9723448753356934f});
  BOOST_TEST(at::allclose(p.detach(), expected, 1e-6, 1e-7), "got " << p);
  BOOST_TEST(optimizer.steps() == 3);
}

BOOST_AUTO_TEST_CASE(no_decay_for_bias_and_layer_norm) {
  BOOST_TEST(excluded_from_weight_decay("classifier.bias"));
  BOOST_TEST(excluded_from_weight_decay("bert.embeddings.LayerNorm.weight"));
  BOOST_TEST(excluded_from_weight_decay("distilbert.transformer.layer.0.sa_layer_norm.weight"));
  BOOST_TEST(!excluded_from_weight_decay("classifier.weight"));
}

BOOST_AUTO_TEST_CASE(state_round_trip_and_strict_load) {
  at::Tensor p = at::ones({3}).set_requires_grad(true);
  AdamW a({{"w", p}}, {});
  p.mutable_grad() = at::full({3}, 0.5f);
  a.step(0.01);
  const auto state = a.state_dict();
  at::Tensor q = at::ones({3}).set_requires_grad(true);
  AdamW b({{"w", q}}, {});
  b.load_state_dict(state);
  BOOST_TEST(b.steps() == 1);
  BOOST_TEST(at::equal(b.state_dict().at("exp_avg.w"), state.at("exp_avg.w")));

  at::Tensor r = at::ones({4}).set_requires_grad(true);
  AdamW c({{"w", r}, {"v", at::ones({1})}}, {});
  try {
    c.load_state_dict(state);
    BOOST_FAIL("expected an error");
  } catch (const hpctrain::Error& e) {
    const std::string message = e.what();
    BOOST_TEST(message.find("'exp_avg.w' has shape 3, expected 4") != std::string::npos, message);
    BOOST_TEST(message.find("missing 'exp_avg.v'") != std::string::npos, message);
  }
}

BOOST_AUTO_TEST_SUITE_END()
