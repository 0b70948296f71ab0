// validate_train_options (train_options.hpp): every check names the flag, the value and what is allowed;
// train_option_fields: the one table of TrainOptions' members (Note [Agreed options]).
#include "hpctrain/train/train_options.hpp"

#include <fmt/format.h>

#include <cmath>
#include <iterator>
#include <sstream>

#include "hpctrain/core/error.hpp"
#include "hpctrain/core/field_count.hpp"
#include "hpctrain/train/run_folder.hpp"
#include "hpctrain/train/schedule.hpp"
#include "hpctrain/train/parallel/strategy.hpp"
#include "hpctrain/train/time_limit.hpp"
#include "lora_setup.hpp"

namespace hpctrain::train {
namespace {

namespace fs = std::filesystem;

void check_positive(int64_t value, const char* flag) {
  HPCTRAIN_CHECK(value >= 1, "{} {}: expected an integer >= 1", flag, value);
}
void check_not_negative(int64_t value, const char* flag, const char* zero_means) {
  HPCTRAIN_CHECK(value >= 0, "{} {}: expected an integer >= 0 (0 = {})", flag, value, zero_means);
}
// Integer options are bounded before any arithmetic (issue 30): products such as batch x ranks x accumulation and
// shifts such as MiB << 20 then stay far inside int64.
void check_at_most(int64_t value, int64_t most, const char* flag) {
  HPCTRAIN_CHECK(value <= most, "{} {}: expected at most {}", flag, value, most);
}
void check_finite(double value, const char* flag) {
  HPCTRAIN_CHECK(std::isfinite(value), "{} {}: expected a finite number", flag, value);
}

void check_model_choice(const TrainOptions& o) {
  HPCTRAIN_CHECK(o.model_dir.empty() != o.model_config.empty(),
                 "give exactly one of --model DIR (a Hugging Face folder) and --model-config FILE|preset:NAME "
                 "(got {})", o.model_dir.empty() ? "neither" : "both");
  if (!o.model_dir.empty())
    HPCTRAIN_CHECK(fs::is_directory(o.model_dir), "--model '{}': not a folder (expected a Hugging Face model folder "
                   "with config.json and model.safetensors)", o.model_dir.string());
  const bool preset = o.model_config.rfind("preset:", 0) == 0;
  if (!o.model_config.empty() && !preset)
    HPCTRAIN_CHECK(fs::is_regular_file(o.model_config), "--model-config '{}': no such file (expected a config.json "
                   "or preset:NAME)", o.model_config);
  if (!o.tokenizer.empty())
    HPCTRAIN_CHECK(fs::is_regular_file(o.tokenizer / "vocab.txt") || fs::is_regular_file(o.tokenizer / "tokenizer.json"),
                   "--tokenizer '{}': expected a folder with vocab.txt or tokenizer.json", o.tokenizer.string());
}

void check_optimization(const TrainOptions& o) {
  HPCTRAIN_CHECK(o.max_steps > 0 || o.epochs >= 1, "--epochs {}: expected >= 1 (or give --max-steps)", o.epochs);
  HPCTRAIN_CHECK(o.max_steps == -1 || o.max_steps > 0, "--max-steps {}: expected > 0 (or -1: use --epochs)", o.max_steps);
  check_positive(o.batch_size, "--batch-size");
  check_positive(o.cache_mb, "--cache-mb");
  check_not_negative(o.eval_batch_size, "--eval-batch-size", "same as --batch-size");
  check_positive(o.accelerator.gradient_accumulation_steps, "--gradient-accumulation-steps");
  constexpr int64_t kMostBatch = int64_t{1} << 24, kMostMib = int64_t{1} << 30, kMostEpochs = int64_t{1} << 24;
  check_at_most(o.batch_size, kMostBatch, "--batch-size");
  check_at_most(o.eval_batch_size, kMostBatch, "--eval-batch-size");
  check_at_most(o.accelerator.gradient_accumulation_steps, kMostBatch, "--gradient-accumulation-steps");
  check_at_most(o.cache_mb, kMostMib, "--cache-mb");
  check_at_most(o.epochs, kMostEpochs, "--epochs");
  check_finite(o.lr, "--lr");
  HPCTRAIN_CHECK(o.lr >= 0, "--lr {}: expected >= 0", o.lr);
  optim::validate_optimizer_options(o.optimizer);
  HPCTRAIN_CHECK(o.warmup_ratio >= 0 && o.warmup_ratio < 1, "--warmup-ratio {}: expected 0 <= ratio < 1", o.warmup_ratio);
  check_not_negative(o.warmup_steps, "--warmup-steps", "use --warmup-ratio");
  HPCTRAIN_CHECK(!(o.warmup_steps > 0 && o.warmup_ratio > 0), "give --warmup-steps or --warmup-ratio, not both");
  (void)parse_schedule(o.lr_scheduler);  // Error lists the schedules
  check_finite(o.max_grad_norm, "--max-grad-norm");
  models::check_loss_chunk_tokens(o.loss_chunk_tokens);
}

void check_distributed(const TrainOptions& o) {
  const AcceleratorOptions& a = o.accelerator;
  HPCTRAIN_CHECK(a.bucket_mb > 0 && a.bucket_mb <= 4096, "--bucket-mb {}: expected 0 < MiB <= 4096", a.bucket_mb);
  HPCTRAIN_CHECK(a.first_bucket_mb > 0 && a.first_bucket_mb <= 4096, "--first-bucket-mb {}: expected 0 < MiB <= 4096",
                 a.first_bucket_mb);
  check_not_negative(o.check_sync_every, "--check-sync-every", "never");
  if (!o.inject_overflow.empty()) (void)parse_injected_overflow(o.inject_overflow);
  HPCTRAIN_CHECK(a.threads >= 0, "--threads {}: expected >= 0 (0 = cores on the node / ranks on the node)", a.threads);
  HPCTRAIN_CHECK(a.device == "auto" || a.device == "cpu" || a.device == "cuda", "--device '{}': expected auto, cpu or cuda",
                 a.device);
  HPCTRAIN_CHECK(a.collective_timeout >= 0 && a.collective_timeout <= 1e9,
                 "--collective-timeout {}: expected seconds >= 0 (0 = off)", a.collective_timeout);
  check_not_negative(a.local_sgd_steps, "--local-sgd-steps", "off: gradients averaged every step");
  // Note [Found-inf agreement] reads the overflow flag from the averaged gradients, which Local SGD never forms.
  const bool scaled = a.mixed_precision == MixedPrecision::fp16 || a.loss_scaling == LossScaling::dynamic;
  HPCTRAIN_CHECK(a.local_sgd_steps == 0 || !scaled,
                 "--local-sgd-steps {} with loss scaling (--mixed-precision fp16 or --loss-scale dynamic) is not "
                 "supported: the ranks agree on skipped steps through the averaged gradients, which Local SGD does "
                 "not form\n  hint: use --mixed-precision bf16 (no loss scaling) or drop --local-sgd-steps",
                 a.local_sgd_steps);
  parallel::check_zero_combinations(a.zero_stage, a.local_sgd_steps, o.optimizer.optim);
  // Local SGD averages parameters, never gradients: a bf16 gradient wire would silently do nothing.
  HPCTRAIN_CHECK(a.local_sgd_steps == 0 || a.grad_reduce_dtype == GradReduceDtype::fp32,
                 "--grad-reduce-dtype bf16 with --local-sgd-steps {} is not supported: Local SGD reduces no gradients "
                 "(it averages the parameters, in fp32)\n  hint: drop one of the two options", a.local_sgd_steps);
}

void check_outputs(const TrainOptions& o) {
  HPCTRAIN_CHECK(!o.output.empty(), "--output DIR is required (checkpoints, final model and metrics.jsonl go there)");
  HPCTRAIN_CHECK(!fs::exists(o.output) || fs::is_directory(o.output), "--output '{}' exists and is not a folder",
                 o.output.string());
  check_not_negative(o.save_steps, "--save-steps", "at the end of every epoch");
  check_not_negative(o.save_total_limit, "--save-total-limit", "keep all");
  check_not_negative(o.eval_steps, "--eval-steps", "at the end of every epoch");
  (void)parse_save_dtype(o.save_dtype);
  if (!o.timeline.empty()) {
    const fs::path parent = o.timeline.parent_path();
    HPCTRAIN_CHECK(!fs::is_directory(o.timeline), "--timeline '{}' is a folder; expected a file name such as "
                   "timeline.json", o.timeline.string());
    HPCTRAIN_CHECK(parent.empty() || fs::is_directory(parent), "--timeline '{}': the folder '{}' does not exist",
                   o.timeline.string(), parent.string());
  }
  if (!o.max_time.empty()) (void)parse_duration(o.max_time);
  check_positive(o.logging_steps, "--logging-steps");
  HPCTRAIN_CHECK(o.peak_tflops >= 0 && o.peak_tflops < 1e9, "--peak-tflops {}: expected TFLOP/s per rank >= 0 (0: measure)",
                 o.peak_tflops);
  HPCTRAIN_CHECK(o.report_to == "tensorboard" || o.report_to == "none", "--report-to '{}': expected tensorboard or none",
                 o.report_to);
  HPCTRAIN_CHECK(o.resume.empty() || !o.overwrite_output_dir, "--resume {} continues the run in --output; "
                 "--overwrite-output-dir starts a new one: give one of them", o.resume);
  if (!o.resume.empty() && o.resume != "auto")
    HPCTRAIN_CHECK(fs::is_regular_file(fs::path(o.resume) / "trainer_state.json"),
                   "--resume '{}': not a complete checkpoint folder (no trainer_state.json); expected auto or "
                   "OUTPUT/checkpoint-STEP", o.resume);
  const bool config_file = !o.model_config.empty() && o.model_config.rfind("preset:", 0) != 0;
  const fs::path resume = o.resume == "auto" ? fs::path() : fs::path(o.resume);
  check_run_inputs(o.output,
                   {{"--model", o.model_dir}, {"--tokenizer", o.tokenizer}, {"--data", o.data},
                    {"--model-config", config_file ? fs::path(o.model_config) : fs::path()}, {"--resume", resume}},
                   extra_run_outputs(o), resume);
}


// ---- the table of members (train_option_fields) ----

std::string to_text(const std::string& value) { return value; }
std::string to_text(const fs::path& value) { return value.string(); }
std::string to_text(data::ShuffleMode value) { return std::string(data::to_string(value)); }
std::string to_text(bool value) { return value ? "true" : "false"; }
std::string to_text(MixedPrecision value) { return std::string(to_string(value)); }
std::string to_text(LossScaling value) { return std::string(to_string(value)); }
std::string to_text(GradReduceDtype value) { return std::string(to_string(value)); }
template <typename Number>
std::string to_text(Number value) { return fmt::format("{}", value); }

template <auto Member>
std::string text_of(const TrainOptions& options) { return to_text(options.*Member); }
template <auto Member>  // a member of TrainOptions::accelerator
std::string accelerator_text_of(const TrainOptions& options) { return to_text(options.accelerator.*Member); }
template <auto Member>  // a member of TrainOptions::optimizer
std::string optimizer_text_of(const TrainOptions& options) { return to_text(options.optimizer.*Member); }

using O = TrainOptions;
using A = AcceleratorOptions;
using Opt = optim::OptimizerOptions;
constexpr Agreement kValue = Agreement::value, kContent = Agreement::content, kRank0 = Agreement::rank0,
                    kPerRank = Agreement::per_rank;
const OptionField kFields[] = {
    {"--data", kContent, text_of<&O::data>},  // compared as the dataset's identity (dataset_identity.hpp)
    {"--train-split", kValue, text_of<&O::train_split>},
    {"--eval-split", kValue, text_of<&O::eval_split>},
    {"--eval-split (given explicitly)", kValue, text_of<&O::eval_split_required>},  // a missing split is an error
    {"--shuffle", kValue, text_of<&O::shuffle>},
    {"--cache-mb", kValue, text_of<&O::cache_mb>},  // decides the streaming blocks, hence the data order
    {"--tokenizer", kContent, text_of<&O::tokenizer>},
    {"--model", kContent, text_of<&O::model_dir>},
    {"--model-config", kContent, text_of<&O::model_config>},
    {"--lora-r", kValue, text_of<&O::lora_r>},
    {"--lora-alpha", kValue, text_of<&O::lora_alpha>},
    {"--lora-dropout", kValue, text_of<&O::lora_dropout>},
    {"--lora-target-modules", kValue, text_of<&O::lora_target_modules>},
    {"--lora-modules-to-save", kValue, text_of<&O::lora_modules_to_save>},
    {"--merge-lora", kValue, text_of<&O::merge_lora>},  // every rank takes part in saving the final model
    {"--quantize-base", kValue, text_of<&O::quantize_base>},  // every rank holds the same 4-bit base
    {"--double-quant", kValue, text_of<&O::double_quant>},
    {"--quant-blocksize", kValue, text_of<&O::quant_blocksize>},
    {"--quantize-embeddings", kValue, text_of<&O::quantize_embeddings>},
    {"--epochs", kValue, text_of<&O::epochs>},
    {"--max-steps", kValue, text_of<&O::max_steps>},
    {"--batch-size", kValue, text_of<&O::batch_size>},
    {"--eval-batch-size", kValue, text_of<&O::eval_batch_size>},
    {"--lr", kValue, text_of<&O::lr>},
    // TrainOptions::optimizer, member by member (kOptimizerFields below counts them)
    {"--optim", kValue, optimizer_text_of<&Opt::optim>},
    {"--weight-decay", kValue, optimizer_text_of<&Opt::weight_decay>},
    {"--adam-beta1", kValue, optimizer_text_of<&Opt::adam_beta1>},
    {"--adam-beta2", kValue, optimizer_text_of<&Opt::adam_beta2>},
    {"--adam-epsilon", kValue, optimizer_text_of<&Opt::adam_epsilon>},
    {"--sgd-momentum", kValue, optimizer_text_of<&Opt::sgd_momentum>},
    {"--sgd-dampening", kValue, optimizer_text_of<&Opt::sgd_dampening>},
    {"--sgd-nesterov", kValue, optimizer_text_of<&Opt::sgd_nesterov>},
    {"--adafactor-beta1", kValue, optimizer_text_of<&Opt::adafactor_beta1>},
    {"--adafactor-relative-step", kValue, optimizer_text_of<&Opt::adafactor_relative_step>},
    {"--adafactor-scale-parameter", kValue, optimizer_text_of<&Opt::adafactor_scale_parameter>},
    {"--adafactor-warmup-init", kValue, optimizer_text_of<&Opt::adafactor_warmup_init>},
    {"--adafactor-clip-threshold", kValue, optimizer_text_of<&Opt::adafactor_clip_threshold>},
    {"--adafactor-decay-rate", kValue, optimizer_text_of<&Opt::adafactor_decay_rate>},
    {"--adafactor-eps1", kValue, optimizer_text_of<&Opt::adafactor_eps1>},
    {"--adafactor-eps2", kValue, optimizer_text_of<&Opt::adafactor_eps2>},
    {"--warmup-ratio", kValue, text_of<&O::warmup_ratio>},
    {"--warmup-steps", kValue, text_of<&O::warmup_steps>},
    {"--lr-scheduler", kValue, text_of<&O::lr_scheduler>},
    {"--max-grad-norm", kValue, text_of<&O::max_grad_norm>},
    {"--skip-nonfinite", kValue, text_of<&O::skip_nonfinite>},
    {"--loss-chunk-tokens", kValue, text_of<&O::loss_chunk_tokens>},  // the loss's summation order
    {"--device", kValue, accelerator_text_of<&A::device>},
    {"--threads", kPerRank, accelerator_text_of<&A::threads>},  // nodes may differ in cores (the default already does)
    {"--bucket-mb", kValue, accelerator_text_of<&A::bucket_mb>},
    {"--first-bucket-mb", kValue, accelerator_text_of<&A::first_bucket_mb>},
    {"--overlap", kValue, accelerator_text_of<&A::overlap>},
    {"--gradient-accumulation-steps", kValue, accelerator_text_of<&A::gradient_accumulation_steps>},
    {"--seed", kValue, accelerator_text_of<&A::seed>},
    {"--log-all-ranks", kPerRank, accelerator_text_of<&A::log_all_ranks>},
    {"--collective-timeout", kValue, accelerator_text_of<&A::collective_timeout>},
    {"--mixed-precision", kValue, accelerator_text_of<&A::mixed_precision>},
    {"--loss-scale", kValue, accelerator_text_of<&A::loss_scaling>},
    {"--grad-reduce-dtype", kValue, accelerator_text_of<&A::grad_reduce_dtype>},
    {"--gradient-checkpointing", kValue, accelerator_text_of<&A::gradient_checkpointing>},
    {"--local-sgd-steps", kValue, accelerator_text_of<&A::local_sgd_steps>},
    {"--zero-stage", kValue, accelerator_text_of<&A::zero_stage>},  // every rank must reduce and step alike
    {"--zero-reshard-after-forward", kValue, accelerator_text_of<&A::zero_reshard_after_forward>},  // gathers match
    {"--check-sync-every", kValue, text_of<&O::check_sync_every>},
    {"--output", kRank0, text_of<&O::output>},
    {"--save-steps", kValue, text_of<&O::save_steps>},
    {"--save-total-limit", kValue, text_of<&O::save_total_limit>},
    {"--resume", kRank0, text_of<&O::resume>},
    {"--overwrite-output-dir", kRank0, text_of<&O::overwrite_output_dir>},
    {"--eval-steps", kValue, text_of<&O::eval_steps>},
    {"--save-dtype", kValue, text_of<&O::save_dtype>},
    {"--max-time", kValue, text_of<&O::max_time>},  // one rank stopping alone would hang the others
    {"--logging-steps", kValue, text_of<&O::logging_steps>},
    {"--peak-tflops", kPerRank, text_of<&O::peak_tflops>},  // a rank's peak (nodes may differ); only for the log
    {"--no-progress", kPerRank, text_of<&O::progress>},
    {"--report-to", kRank0, text_of<&O::report_to>},  // rank 0 writes the event file
    {"--trace-examples", kPerRank, text_of<&O::trace_examples>},
    {"--timeline", kValue, text_of<&O::timeline>},  // collective: every rank records and sends its spans
    {"--inject-overflow", kValue, text_of<&O::inject_overflow>},  // names the rank: equal everywhere
};
// TrainOptions::accelerator and TrainOptions::optimizer have one entry per member of AcceleratorOptions and
// OptimizerOptions instead of one of their own.
constexpr std::size_t kNestedFields = core::field_count<AcceleratorOptions>() + core::field_count<optim::OptimizerOptions>();
static_assert(std::extent_v<decltype(kFields)> == core::field_count<TrainOptions>() - 2 + kNestedFields,
              "TrainOptions, AcceleratorOptions or OptimizerOptions gained or lost a member: give it an entry in "
              "kFields (flag and Agreement, Note [Agreed options])");

}  // namespace

c10::ScalarType parse_save_dtype(const std::string& text) {
  if (text == "fp32") return c10::kFloat;
  if (text == "bf16") return c10::kBFloat16;
  if (text == "fp16") return c10::kHalf;
  fail("--save-dtype '{}': expected fp32, bf16 or fp16", text);
}

InjectedOverflow parse_injected_overflow(const std::string& text) {
  InjectedOverflow out;
  char colon = 0;
  std::istringstream in(text);
  const bool ok = (in >> out.rank >> colon >> out.step) && colon == ':' && in.peek() == EOF && out.rank >= 0 &&
                  out.step >= 1;
  HPCTRAIN_CHECK(ok, "--inject-overflow '{}': expected RANK:STEP (rank >= 0, optimizer step >= 1)", text);
  return out;
}

const std::vector<OptionField>& train_option_fields() {
  static const std::vector<OptionField> fields(std::begin(kFields), std::end(kFields));
  return fields;
}

std::vector<std::string> extra_run_outputs(const TrainOptions& options) {
  if (options.timeline.empty() || options.output.empty()) return {};
  const auto resolved = [](const fs::path& path) {
    const fs::path full = fs::weakly_canonical(path).lexically_normal();
    return full.filename().empty() ? full.parent_path() : full;  // "dir/" as "dir"
  };
  const fs::path timeline = resolved(options.timeline);
  if (timeline.parent_path() != resolved(options.output)) return {};
  return {timeline.filename().string()};
}

void validate_train_options(const TrainOptions& options) {
  HPCTRAIN_CHECK(!options.data.empty(), "--data FILE.h5 is required (make one with `hpctrain prep`)");
  HPCTRAIN_CHECK(fs::is_regular_file(options.data), "--data '{}': no such file", options.data.string());
  HPCTRAIN_CHECK(!options.train_split.empty(), "--train-split: expected a split name");
  check_model_choice(options);
  check_lora_options(options);
  check_optimization(options);
  check_distributed(options);
  check_outputs(options);
}

}  // namespace hpctrain::train
