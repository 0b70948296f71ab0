// measure_step_profile (scaling_model.hpp): forward, backward and optimizer of real single-rank steps, timed.
#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>

#include "hpctrain/core/error.hpp"
#include "hpctrain/dist/comm.hpp"
#include "hpctrain/models/registry.hpp"
#include "hpctrain/models/weight_decay.hpp"
#include "hpctrain/train/accelerator.hpp"
#include "hpctrain/optim/optimizer.hpp"
#include "hpctrain/train/scaling_model.hpp"
#include "random_batch.hpp"

namespace hpctrain::train {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const std::size_t mid = values.size() / 2;
  return values.size() % 2 == 1 ? values[mid] : (values[mid - 1] + values[mid]) / 2;
}

}  // namespace

StepProfile measure_step_profile(const io::HfConfig& config, const MemoryEstimateOptions& options, int threads,
                                 int warmup, int steps) {
  HPCTRAIN_CHECK(steps >= 1 && warmup >= 0, "bench predict: need --steps >= 1 and --warmup >= 0, got {} and {}", steps,
                 warmup);
  const std::unique_ptr<dist::Comm> comm = dist::make_single_process_comm();
  AcceleratorOptions accelerator_options;
  accelerator_options.threads = threads;
  Accelerator accelerator(*comm, accelerator_options);
  const models::ModelInputs inputs = random_token_batch(config, options);
  const auto model = models::build_model(config);
  accelerator.prepare_model(*model);
  const auto optimizer = optim::make_optimizer(options.optimizer, model->named_parameters().pairs(),
                                               models::no_weight_decay_parameters(*model));
  model->train();
  std::vector<double> forward, backward, step;
  for (int i = 0; i < warmup + steps; ++i) {
    accelerator.zero_grad();
    auto start = Clock::now();
    const at::Tensor loss = model->forward(inputs).loss;
    const double f = seconds_since(start);
    start = Clock::now();
    accelerator.backward(loss);
    const double b = seconds_since(start);
    start = Clock::now();
    optimizer->step(1e-5);
    if (i < warmup) continue;
    step.push_back(seconds_since(start)), forward.push_back(f), backward.push_back(b);
  }
  return {median(forward), median(backward), median(step)};
}

}  // namespace hpctrain::train
