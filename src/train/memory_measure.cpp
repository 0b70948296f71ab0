// parameter_shapes and measure_training_step (memory_estimate.hpp): the model built for real, one step run.
#include <ATen/ATen.h>

#include "hpctrain/core/error.hpp"
#include "hpctrain/core/host_allocator.hpp"
#include "hpctrain/core/memory_info.hpp"
#include "hpctrain/dist/comm.hpp"
#include "hpctrain/models/registry.hpp"
#include "hpctrain/optim/optimizer.hpp"
#include "hpctrain/train/accelerator.hpp"
#include "hpctrain/train/memory_estimate.hpp"
#include "random_batch.hpp"

namespace hpctrain::train {

ParameterShapes parameter_shapes(const io::HfConfig& config) {
  ParameterShapes shapes;
  for (const auto& item : models::build_model(config)->named_parameters())
    shapes.emplace_back(item.key(), item.value().sizes().vec());
  return shapes;
}

namespace {

int64_t read_or_fail(std::optional<int64_t> bytes, const char* what) {
  HPCTRAIN_CHECK(bytes.has_value(), "--measure: cannot read {} from /proc/self/status", what);
  return *bytes;
}

}  // namespace

MeasuredStep measure_training_step(const io::HfConfig& config, const MemoryEstimateOptions& options, int threads) {
  const std::unique_ptr<dist::Comm> comm = dist::make_single_process_comm();
  AcceleratorOptions accelerator_options;
  accelerator_options.threads = threads;
  // The step `hpctrain train` runs with these options: bf16 autocast around forward, layers recomputed in backward.
  accelerator_options.mixed_precision = options.precision == "bf16" ? MixedPrecision::bf16 : MixedPrecision::no;
  accelerator_options.gradient_checkpointing = options.gradient_checkpointing;
  Accelerator accelerator(*comm, accelerator_options);
  const models::ModelInputs inputs = random_token_batch(config, options);
  const core::LiveTensorResidency live_tensors;  // the tensors' peak, not the tuned heap's reuse pattern
  HPCTRAIN_CHECK(core::reset_peak_resident(), "--measure: the kernel refused to reset the peak (/proc/self/clear_refs)");
  MeasuredStep measured;
  measured.baseline_bytes = read_or_fail(core::resident_bytes(), "VmRSS");
  {
    const auto model = models::build_model(config);
    accelerator.prepare_model(*model);
    const auto optimizer = optim::make_optimizer(options.optimizer, model->named_parameters().pairs());
    model->train();
    at::Tensor loss;
    {
      const AutocastRegion region = accelerator.autocast();
      loss = model->forward(inputs).loss;
    }
    accelerator.backward(loss);
    optimizer->step(1e-5);
  }
  measured.peak_bytes = read_or_fail(core::peak_resident_bytes(), "VmHWM") - measured.baseline_bytes;
  return measured;
}

}  // namespace hpctrain::train
