// parameter_shapes and measure_training_step (memory_estimate.hpp): the model built for real, one step run.
#include <ATen/ATen.h>

#include "hpctrain/core/error.hpp"
#include "hpctrain/core/host_allocator.hpp"
#include "hpctrain/core/memory_info.hpp"
#include "hpctrain/dist/collective.hpp"
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

// Note [Measured ZeRO step]: launched on N > 1 ranks, every rank runs the step `mpirun -np N hpctrain train
// --zero-stage S` runs (its reducer over `comm`, the sharded optimizer of Accelerator::make_optimizer, the step
// protocol) and the measurement is the largest rank's: what estimate-memory's per-rank figures promise
// (Note [ZeRO memory arithmetic] in src/train/zero_memory_estimate.cpp). One process keeps today's step over a
// single-process comm, whatever --world-size says at stage 0 (stage 0's estimate does not depend on it).
namespace {

void check_measured_world(const MemoryEstimateOptions& options, int launched) {
  HPCTRAIN_CHECK((options.zero_stage == 0 && launched == 1) || launched == options.world_size,
                 "estimate-memory --measure --world-size {}: launched on {} rank(s); --measure runs the step on the "
                 "launched ranks, so launch it with `mpirun -np {} hpctrain estimate-memory ... --world-size {}`",
                 options.world_size, launched, options.world_size, options.world_size);
}

AcceleratorOptions measured_accelerator_options(const MemoryEstimateOptions& options, int threads) {
  AcceleratorOptions a;
  a.threads = threads;
  // The step `hpctrain train` runs with these options: bf16 autocast around forward, layers recomputed in backward.
  a.mixed_precision = options.precision == "bf16" ? MixedPrecision::bf16 : MixedPrecision::no;
  a.gradient_checkpointing = options.gradient_checkpointing;
  a.zero_stage = options.zero_stage;
  a.zero_reshard_after_forward = options.zero_reshard_after_forward;
  a.bucket_mb = bytes_to_mib(options.bucket_bytes);
  a.first_bucket_mb = bytes_to_mib(options.first_bucket_bytes);
  return a;
}

// One forward, backward and optimizer step of a freshly built model; everything it allocates is freed on return.
// The peak is reset once the model is prepared: the step's peak, not the start-up's (ZeRO-3 builds the whole model
// before it shards it; at the other stages the step holds more than the start-up anyway).
void run_measured_step(Accelerator& accelerator, const io::HfConfig& config, const MemoryEstimateOptions& options,
                       const models::ModelInputs& inputs) {
  const auto model = models::build_model(config);
  accelerator.prepare_model(*model);
  const auto optimizer = accelerator.make_optimizer(options.optimizer, model->named_parameters().pairs());
  HPCTRAIN_CHECK(core::reset_peak_resident(), "--measure: the kernel refused to reset the peak (/proc/self/clear_refs)");
  model->train();
  at::Tensor loss;
  {
    const AutocastRegion region = accelerator.autocast();
    loss = model->forward(inputs).loss;
  }
  accelerator.backward(loss);
  (void)accelerator.optimizer_step(1e-5, /*max_grad_norm=*/0.0);
}

}  // namespace

MeasuredStep measure_training_step(const io::HfConfig& config, const MemoryEstimateOptions& options, int threads,
                                   dist::Comm& launched) {
  check_measured_world(options, launched.world_size());
  const std::unique_ptr<dist::Comm> single = launched.world_size() == 1 ? dist::make_single_process_comm() : nullptr;
  dist::Comm& comm = single != nullptr ? *single : launched;
  Accelerator accelerator(comm, measured_accelerator_options(options, threads));
  const models::ModelInputs inputs = random_token_batch(config, options);
  const core::LiveTensorResidency live_tensors;  // the tensors' peak, not the tuned heap's reuse pattern
  MeasuredStep measured;
  dist::run_collectively(comm, "estimate-memory --measure", [&] {
    HPCTRAIN_CHECK(core::reset_peak_resident(), "--measure: the kernel refused to reset the peak "
                   "(/proc/self/clear_refs)");
    measured.baseline_bytes = read_or_fail(core::resident_bytes(), "VmRSS");
    run_measured_step(accelerator, config, options, inputs);
    measured.peak_bytes = read_or_fail(core::peak_resident_bytes(), "VmHWM") - measured.baseline_bytes;
  });
  measured.peak_bytes = comm.allreduce_value(measured.peak_bytes, dist::ReduceOp::max);  // the largest rank's
  measured.baseline_bytes = comm.allreduce_value(measured.baseline_bytes, dist::ReduceOp::max);
  measured.ranks = comm.world_size();
  return measured;
}

}  // namespace hpctrain::train
