// parameter_shapes and measure_training_step (memory_estimate.hpp): the model built for real, one step run.
#include <ATen/ATen.h>

#include "hpctrain/core/error.hpp"
#include "hpctrain/core/host_allocator.hpp"
#include "hpctrain/core/memory_info.hpp"
#include "hpctrain/dist/collective.hpp"
#include "hpctrain/dist/comm.hpp"
#include "hpctrain/models/lora.hpp"
#include "hpctrain/models/qlora.hpp"
#include "hpctrain/models/registry.hpp"
#include "hpctrain/optim/optimizer.hpp"
#include "hpctrain/train/accelerator.hpp"
#include "hpctrain/train/memory_estimate.hpp"
#include "lora_setup.hpp"
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

// The model a step is measured on: with options.lora_r, LoRA as `hpctrain train` sets it up (and with
// options.quantize its frozen layers in 4-bit form, Note [Quantized base]; the peak then restarts from the model as
// built, since the float32 weights it was quantized from are gone: a QLoRA step's peak, not its load's).
std::shared_ptr<models::Model> measured_model(const io::HfConfig& config, const MemoryEstimateOptions& options) {
  const auto model = models::build_model(config);
  if (options.lora_r == 0) return model;
  TrainOptions train_options;  // lora_config_of: the options `hpctrain train` resolves the same way
  train_options.lora_r = options.lora_r;
  train_options.lora_target_modules = options.lora_target_modules;
  std::optional<models::LoraConfig> lora = lora_config_of(train_options, *model);
  (void)models::apply_lora(*model, *lora);
  if (options.quantize) {
    (void)models::quantize_frozen_base(*model, *options.quantize);
    HPCTRAIN_CHECK(core::reset_peak_resident(), "--measure: the kernel refused to reset the peak (/proc/self/clear_refs)");
  }
  return model;
}

// One forward, backward and optimizer step of a freshly built model; everything it allocates is freed on return.
// Returns the model's bytes.
int64_t run_measured_step(Accelerator& accelerator, const io::HfConfig& config, const MemoryEstimateOptions& options,
                          const models::ModelInputs& inputs) {
  const auto model = measured_model(config, options);
  accelerator.prepare_model(*model);
  optim::NamedParameters trainable;  // a frozen parameter gets no optimizer state (as in `hpctrain train`)
  for (const auto& item : model->named_parameters())
    if (item.value().requires_grad()) trainable.emplace_back(item.key(), item.value());
  const auto optimizer = accelerator.make_optimizer(options.optimizer, trainable);
  HPCTRAIN_CHECK(core::reset_peak_resident(), "--measure: the kernel refused to reset the peak (/proc/self/clear_refs)");
  model->train();
  at::Tensor loss;
  {
    const AutocastRegion region = accelerator.autocast();
    loss = measured_loss(*model, inputs, options);
  }
  accelerator.backward(loss);
  (void)accelerator.optimizer_step(1e-5, /*max_grad_norm=*/0.0);
  return models::model_bytes(*model);
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
    measured.model_bytes = run_measured_step(accelerator, config, options, inputs);
    measured.peak_bytes = read_or_fail(core::peak_resident_bytes(), "VmHWM") - measured.baseline_bytes;
  });
  measured.peak_bytes = comm.allreduce_value(measured.peak_bytes, dist::ReduceOp::max);  // the largest rank's
  measured.baseline_bytes = comm.allreduce_value(measured.baseline_bytes, dist::ReduceOp::max);
  measured.ranks = comm.world_size();
  return measured;
}

}  // namespace hpctrain::train
