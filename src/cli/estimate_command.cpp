// `hpctrain estimate-memory` (cf. `accelerate estimate-memory`): the bytes one training step needs per rank,
// as a table or JSON; --measure runs one real step here (under mpirun: on every rank, Note [Measured ZeRO step])
// and prints the measured peak beside the estimate.
#include <fmt/format.h>

#include <cstdio>
#include <filesystem>

#include "commands.hpp"
#include "hpctrain/core/error.hpp"
#include "hpctrain/core/log.hpp"
#include "hpctrain/io/hf_config.hpp"
#include "hpctrain/train/accelerator_options.hpp"
#include "hpctrain/train/memory_estimate.hpp"
#include "hpctrain/optim/optimizer.hpp"
#include "option_parsing.hpp"

namespace hpctrain::cli {
namespace {

constexpr const char* kEstimateUsage =
    "hpctrain estimate-memory (--model DIR | --model-config FILE) [--batch-size N] [--sequence-length L] "
    "[--optim NAME] [--precision fp32|bf16] [--gradient-checkpointing] [--zero-stage 0|1|2|3 --world-size N] "
    "[--lora-r R [--lora-target-modules a,b|all-linear] [--quantize-base nf4|fp4 ...]] [--loss-chunk-tokens N] [--json] "
    "[--measure]";

struct EstimateArgs {
  std::string model, model_config;
  bool json = false, measure = false;
  int threads = 0;
  double tolerance = 0;  // --measure: fail when |estimate - measured| / measured exceeds it (0: report only)
  double bucket_mb = train::bytes_to_mib(dist::kDefaultBucketBytes);  // as `hpctrain train`'s, MiB
  double first_bucket_mb = train::bytes_to_mib(dist::kDefaultFirstBucketBytes);
  ZeroFlags zero;
};

po::options_description estimate_options(EstimateArgs& a, train::MemoryEstimateOptions& o) {
  po::options_description g("Estimate");
  g.add_options()
      ("model", po::value(&a.model), "Hugging Face model folder (its config.json)")
      ("model-config", po::value(&a.model_config), "config.json of the model")
      ("batch-size", po::value(&o.batch_size)->default_value(o.batch_size), "examples per rank per micro-batch")
      ("sequence-length", po::value(&o.sequence_length)->default_value(o.sequence_length), "tokens per example")
      ("precision", po::value(&o.precision)->default_value(o.precision), "fp32 | bf16: the activations' dtype")
      ("gradient-checkpointing", po::bool_switch(&o.gradient_checkpointing), "layers keep only their inputs")
      ("world-size", po::value(&o.world_size)->default_value(o.world_size), "ranks ZeRO shards over")
      ("lora-r", po::value(&o.lora_r)->default_value(o.lora_r), "LoRA adapters of this rank on a frozen base: "
       "gradients and optimizer state for the adapters and the classifier head only (0: full fine-tuning)")
      ("lora-target-modules", po::value(&o.lora_target_modules), "as train's (default: PEFT's for the model type)")
      ("bucket-mb", po::value(&a.bucket_mb)->default_value(a.bucket_mb), "gradient bucket size, MiB (as train's)")
      ("first-bucket-mb", po::value(&a.first_bucket_mb)->default_value(a.first_bucket_mb),
       "first gradient bucket size, MiB (as train's)")
      ("json", po::bool_switch(&a.json), "print JSON instead of the table")
      ("measure", po::bool_switch(&a.measure), "run one training step on random data and print its measured peak "
       "(under `mpirun -np N` with --world-size N: on every rank at --zero-stage, the largest rank's peak)")
      ("tolerance", po::value(&a.tolerance)->default_value(0.0),
       "with --measure: exit 1 when the estimate is off the measured peak by more than this fraction (0: never)")
      ("threads", po::value(&a.threads)->default_value(0), "CPU threads of --measure (0: all cores)");
  return g;
}

io::HfConfig load_config(const EstimateArgs& a) {
  HPCTRAIN_CHECK(a.model.empty() != a.model_config.empty(), "estimate-memory: give exactly one of --model DIR and "
                 "--model-config FILE");
  return io::HfConfig::load(a.model.empty() ? std::filesystem::path(a.model_config)
                                            : std::filesystem::path(a.model) / "config.json");
}

// Prints the measurement; false when it is off the estimate by more than the tolerance.
bool report_measurement(const train::MemoryEstimate& e, const train::MeasuredStep& m, const EstimateArgs& a,
                        bool print, nlohmann::json& json) {
  const double error = static_cast<double>(e.total - m.peak_bytes) / static_cast<double>(m.peak_bytes);
  json["measured"] = {{"peak_bytes", m.peak_bytes}, {"baseline_bytes", m.baseline_bytes}, {"relative_error", error},
                      {"ranks", m.ranks}, {"model_bytes", m.model_bytes}};
  if (!a.json && print)
    std::printf("  %-28s %16lld %12.1f MiB  (estimate %+.1f %%)\n",
                m.ranks > 1 ? "measured peak (largest rank)" : "measured peak (RSS growth)",
                static_cast<long long>(m.peak_bytes), static_cast<double>(m.peak_bytes) / (1 << 20), 100 * error);
  return a.tolerance <= 0 || std::abs(error) <= a.tolerance;
}

}  // namespace

int estimate_memory_command(const Args& args, dist::Comm& comm) {
  EstimateArgs a;
  train::MemoryEstimateOptions options;
  QuantizeBaseFlags quantize;
  po::options_description all(kEstimateUsage);
  all.add(estimate_options(a, options)).add(quantize_base_group(quantize)).add(optimizer_group(options.optimizer));
  all.add(loss_group(options.loss_chunk_tokens)).add(zero_group(a.zero));
  po::variables_map values;
  if (!parse_options(args, kEstimateUsage, all, values)) return 0;
  options.zero_stage = a.zero.stage;
  options.quantize = quantize_base_options(quantize);
  HPCTRAIN_CHECK(!options.quantize || options.lora_r > 0, "--quantize-base {} needs --lora-r R (> 0): QLoRA trains "
                 "adapters over the 4-bit base", quantize.type);
  optim::validate_optimizer_options(options.optimizer);
  options.bucket_bytes = static_cast<int64_t>(a.bucket_mb * (1 << 20));
  options.first_bucket_bytes = static_cast<int64_t>(a.first_bucket_mb * (1 << 20));
  options.zero_reshard_after_forward = reshard_after_forward(a.zero);
  HPCTRAIN_CHECK(options.lora_r > 0 || options.lora_target_modules.empty(), "--lora-target-modules needs --lora-r R (> 0)");
  const io::HfConfig config = load_config(a);
  // The step runs before the estimate builds (and frees) its models: carved from the heap those left, a QLoRA step
  // measured up to 280 MiB more than its live tensors on a 350 M model (bench/README.md, "QLoRA").
  std::optional<train::MeasuredStep> measured;
  if (a.measure) {
    log::Context quiet = log::context();
    if (a.json || comm.rank() != 0) quiet.quiet = true;
    const log::Context before = log::context();
    log::set_context(quiet);
    measured = train::measure_training_step(config, options, a.threads, comm);
    log::set_context(before);
  }
  const train::MemoryEstimate estimate = train::estimate_memory(config, train::parameter_shapes(config), options);
  nlohmann::json json = train::to_json(estimate);
  const bool print = comm.rank() == 0;  // --measure under mpirun: every rank measures, rank 0 prints
  if (!a.json && print) std::fputs(train::format_table(estimate).c_str(), stdout);
  std::fflush(stdout);
  bool within = true;
  if (a.json || !print) {  // stdout holds the JSON alone (--measure's step logs notes)
    log::Context quiet = log::context();
    quiet.quiet = true;
    log::set_context(quiet);
  }
  if (measured) within = report_measurement(estimate, *measured, a, print, json);
  if (a.json && print) std::printf("%s\n", json.dump(2).c_str());
  if (!within && print) std::fprintf(stderr, "estimate-memory: the estimate is off the measured peak by more than --tolerance %g\n", a.tolerance);
  return within ? 0 : 1;
}

}  // namespace hpctrain::cli
