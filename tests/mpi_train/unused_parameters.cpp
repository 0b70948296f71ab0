// mpirun -np 2: parameters that get no gradient never hang the job. A module with a parameter no rank
// uses and one only rank 0 uses trains through the Accelerator for a few steps (with accumulation);
// afterwards the replicas are identical, the never-used parameter is unchanged, and the job ends.
#include <ATen/ATen.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>
#include <torch/utils.h>

#include <cstdio>
#include <exception>

#include "hpctrain/core/error.hpp"
#include "hpctrain/ddp/consistency.hpp"
#include "hpctrain/dist/comm.hpp"
#include "hpctrain/models/weight_decay.hpp"
#include "hpctrain/train/accelerator.hpp"
#include "hpctrain/optim/optimizer.hpp"

using namespace hpctrain;

namespace {

struct Net : torch::nn::Module {
  Net() {
    body = register_module("body", torch::nn::Linear(6, 6));
    head = register_module("head", torch::nn::Linear(6, 2));
    never = register_parameter("never_used", at::ones({4}));
    rank0_only = register_parameter("rank0_only", at::ones({6}));
  }
  at::Tensor forward(const at::Tensor& x, bool use_rank0_branch) {
    at::Tensor h = at::relu(body->forward(x));
    if (use_rank0_branch) h = h * rank0_only;
    return head->forward(h);
  }
  torch::nn::Linear body{nullptr}, head{nullptr};
  at::Tensor never, rank0_only;
};

int run(dist::Comm& comm) {
  train::AcceleratorOptions options;
  options.threads = 1, options.device = "cpu", options.gradient_accumulation_steps = 2;
  options.bucket_mb = 0.0001, options.first_bucket_mb = 0.00005;  // several buckets
  train::Accelerator acc(comm, options);
  torch::manual_seed(100 + static_cast<uint64_t>(comm.rank()));  // different init: the broadcast must fix it
  Net net;
  acc.prepare_model(net);
  const auto optimizer = optim::make_optimizer(optim::OptimizerOptions{}, net.named_parameters().pairs(),
                                               models::no_weight_decay_parameters(net));
  acc.register_optimizer(*optimizer);
  for (int64_t micro = 0; micro < 8; ++micro) {
    const bool sync = acc.accumulate();
    torch::manual_seed(static_cast<uint64_t>(micro * 10 + comm.rank()));
    const at::Tensor loss = net.forward(at::randn({5, 6}), comm.rank() == 0).pow(2).mean();
    acc.backward(loss);
    if (!sync) continue;
    acc.clip_grad_norm(1.0);
    optimizer->step(1e-2);
    acc.zero_grad();
  }
  ddp::NamedTensors named;
  for (const auto& item : net.named_parameters()) named.emplace_back(item.key(), item.value());
  const std::string differs = ddp::find_unsynchronized(comm, named);
  HPCTRAIN_CHECK(differs.empty(), "replicas differ after training: '{}'", differs);
  HPCTRAIN_CHECK(at::equal(net.never, at::ones({4})), "the never-used parameter changed");
  HPCTRAIN_CHECK(!at::equal(net.rank0_only, at::ones({6})), "the rank-0-only parameter did not train");
  acc.print("unused parameters: 4 steps, replicas identical, no hang");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  dist::MpiRuntime runtime(&argc, &argv);
  try {
    return run(runtime.world());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "[rank %d] FAILED: %s\n", runtime.world().rank(), e.what());
    runtime.world().abort(1);
  }
}
