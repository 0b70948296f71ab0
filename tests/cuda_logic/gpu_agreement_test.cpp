// On a GPU only (skipped without one; ctest label gpu, for scripts/gpu-check.sh): the CUDA 8-bit AdamW
// (Note [8-bit AdamW on CUDA]) against the CPU implementation, element for element. Both do the same float32
// operations in the same order, each rounded on its own, so parameters, codes and absmax values are expected to
// be identical; the largest parameter difference is printed either way.
#include <boost/test/unit_test.hpp>

#include <ATen/ATen.h>
#include <torch/cuda.h>

#include <iostream>
#include <string>
#include <vector>

#include "hpctrain/optim/adamw_8bit.hpp"

namespace {

struct GpuAvailable {
  boost::test_tools::assertion_result operator()(boost::unit_test::test_unit_id) const {
    boost::test_tools::assertion_result result(torch::cuda::is_available());
    if (!result) result.message() << "no CUDA device: skipped";
    return result;
  }
};

// A quantized weight (several blocks, a partial last one), a small bias (float32 state) and their gradients.
hpctrain::optim::NamedParameters agreement_parameters(const at::Device& device) {
  at::manual_seed(11);
  const at::Tensor weight = at::randn({37, 181}) * 0.02, bias = at::randn({37}) * 0.02;
  return {{"layer.weight", weight.to(device).set_requires_grad(true)}, {"layer.bias", bias.to(device).set_requires_grad(true)}};
}

}  // namespace

BOOST_AUTO_TEST_SUITE(gpu_agreement, *boost::unit_test::precondition(GpuAvailable()))

BOOST_AUTO_TEST_CASE(adamw_8bit_cuda_matches_the_cpu) {
  using namespace hpctrain::optim;
  const at::Device gpu(at::kCUDA, 0);
  const NamedParameters cpu_params = agreement_parameters(at::kCPU), gpu_params = agreement_parameters(gpu);
  AdamW8bit cpu(weight_decay_groups(cpu_params, 0.01, {"layer.bias"}), {}),
      cuda(weight_decay_groups(gpu_params, 0.01, {"layer.bias"}), {});
  for (int step = 0; step < 5; ++step) {
    for (std::size_t i = 0; i < cpu_params.size(); ++i) {
      const at::Tensor grad = at::randn(cpu_params[i].second.sizes()) * 0.1;
      cpu_params[i].second.mutable_grad() = grad;
      gpu_params[i].second.mutable_grad() = grad.to(gpu);
    }
    cpu.step(1e-3);
    cuda.step(1e-3);
  }
  for (std::size_t i = 0; i < cpu_params.size(); ++i) {
    const at::Tensor on_gpu = gpu_params[i].second.detach().cpu();
    const double difference = (on_gpu - cpu_params[i].second.detach()).abs().max().item<double>();
    std::cout << cpu_params[i].first << ": largest difference GPU - CPU " << difference << "\n";
    BOOST_TEST(at::equal(on_gpu, cpu_params[i].second.detach()), cpu_params[i].first);
  }
  const OptimizerState cpu_state = cpu.state_dict(), gpu_state = cuda.state_dict();
  for (const auto& [name, tensor] : cpu_state) BOOST_TEST(at::equal(gpu_state.at(name).cpu(), tensor), name);
}

BOOST_AUTO_TEST_SUITE_END()
