// Optimizers at GPU speed: a step must never wait for the device. On `meta` tensors nothing can be read back
// (item() and data_ptr() throw), so an update that runs there makes no per-parameter host read: SGD with
// momentum, Adafactor (step counters mirrored on the host, its step size kept on the device; Note [Adafactor
// without host reads]) and AdamW's path for parameters off the CPU (Note [AdamW off the CPU]; per tensor on meta,
// whose _foreach_ update is compared with the per-tensor one on the CPU below).
#include <boost/test/unit_test.hpp>

#include <ATen/ATen.h>

#include <memory>
#include <string>
#include <vector>

#include "hpctrain/optim/adafactor.hpp"
#include "hpctrain/optim/adamw.hpp"
#include "hpctrain/optim/sgd.hpp"
#include "optim/adamw_lists.hpp"

using namespace hpctrain::optim;

namespace {

// A weight (2-D: Adafactor's factored moments), a bias (1-D) and a 3-D tensor, with decay and without, on meta,
// each with a gradient.
std::vector<ParameterGroup> meta_groups(at::ScalarType dtype = at::kFloat) {
  const at::TensorOptions meta = at::TensorOptions().device(at::kMeta).dtype(dtype);
  auto param = [&](at::IntArrayRef shape) {
    at::Tensor p = at::empty(shape, meta).set_requires_grad(true);
    p.mutable_grad() = at::empty(shape, meta);
    return p;
  };
  return {ParameterGroup{"decay", 0.01, {{"w", param({6, 4})}, {"k", param({2, 3, 4})}}},
          ParameterGroup{"no_decay", 0.0, {{"b", param({6})}}}};
}

void step_three_times(Optimizer& optimizer) {
  for (int i = 0; i < 3; ++i) optimizer.step(1e-3);
  BOOST_TEST(optimizer.steps() == 3);
  for (const auto& [name, state] : optimizer.state_dict()) {
    if (name != "step") BOOST_TEST(state.is_meta(), name);  // state stays with the parameters
  }
}

}  // namespace

BOOST_AUTO_TEST_SUITE(optimizers_on_meta)

BOOST_AUTO_TEST_CASE(sgd_with_momentum_reads_nothing_back) {
  SgdOptions options;
  options.momentum = 0.9;
  Sgd sgd(meta_groups(), options);
  step_three_times(sgd);
  options.nesterov = true;
  Sgd nesterov(meta_groups(), options);
  step_three_times(nesterov);
}

BOOST_AUTO_TEST_CASE(adafactor_reads_nothing_back) {
  AdafactorOptions options;
  options.scale_parameter = true;
  options.relative_step = true;
  options.warmup_init = true;
  options.beta1 = 0.9;
  Adafactor scaled(meta_groups(), options);
  step_three_times(scaled);
  Adafactor half(meta_groups(at::kBFloat16), options);
  step_three_times(half);
  Adafactor plain(meta_groups(), AdafactorOptions{});
  step_three_times(plain);
}

BOOST_AUTO_TEST_CASE(adamw_off_the_cpu_reads_nothing_back) {
  AdamWOptions options;
  AdamW listed(meta_groups(), options);  // fused: grouped in lists (Note [AdamW off the CPU])
  step_three_times(listed);
  options.fused = false;
  AdamW per_tensor(meta_groups(), options);
  step_three_times(per_tensor);
}

BOOST_AUTO_TEST_SUITE_END()

// The multi-tensor update AdamW uses on CUDA (Note [AdamW off the CPU]) equals the per-tensor one bit for bit
// (on the CPU, where LibTorch also has _foreach_ kernels).
BOOST_AUTO_TEST_SUITE(optimizers_on_meta)

BOOST_AUTO_TEST_CASE(adamw_foreach_update_equals_the_per_tensor_update) {
  at::manual_seed(3);
  NamedParameters reference, listed;
  for (const auto& shape : std::vector<std::vector<int64_t>>{{5, 7}, {7}, {2, 3, 4}}) {
    const at::Tensor p = at::randn(shape);
    reference.emplace_back("p" + std::to_string(reference.size()), p.clone().set_requires_grad(true));
    listed.emplace_back("p" + std::to_string(listed.size()), p.clone());
  }
  AdamWOptions options;
  options.fused = false;  // tensor_update, torch.optim.AdamW(foreach=False)
  AdamW adamw({ParameterGroup{"decay", 0.1, reference}}, options);
  hpctrain::optim::detail::TensorLists lists;
  for (const auto& [name, p] : listed) {
    lists.params.push_back(p);
    lists.exp_avgs.push_back(at::zeros_like(p));
    lists.exp_avg_sqs.push_back(at::zeros_like(p));
  }
  for (int step = 1; step <= 3; ++step) {
    lists.grads.clear();
    for (std::size_t i = 0; i < reference.size(); ++i) {
      const at::Tensor grad = at::randn(reference[i].second.sizes());
      reference[i].second.mutable_grad() = grad;
      lists.grads.push_back(grad.clone());
    }
    adamw.step(1e-2);
    auto scalars = hpctrain::optim::detail::adamw_scalars(options.beta1, options.beta2, options.eps, step, 1e-2);
    scalars.decay_factor = 1.0 - 1e-2 * 0.1;
    hpctrain::optim::detail::adamw_foreach_update(lists, scalars);
  }
  for (std::size_t i = 0; i < reference.size(); ++i) BOOST_TEST(at::equal(reference[i].second.detach(), lists.params[i]));
}

BOOST_AUTO_TEST_SUITE_END()
