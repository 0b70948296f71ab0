// make_optimizer and --optim's names (optimizer.hpp, optimizer_options.hpp): one table, one row per
// optimizer with its Hugging Face Trainer name, aliases, option checks and builder. A new optimizer is
// one row here plus its options in OptimizerOptions.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>

#include "hpctrain/core/error.hpp"
#include "hpctrain/optim/adafactor.hpp"
#include "hpctrain/optim/adamw.hpp"
#include "hpctrain/optim/adamw_8bit.hpp"
#include "hpctrain/optim/blockwise_quant.hpp"
#include "hpctrain/optim/optimizer.hpp"
#include "hpctrain/optim/sgd.hpp"

namespace hpctrain::optim {
namespace {

using Groups = std::vector<ParameterGroup>;

void check_unit_interval(double value, const char* flag, const char* what) {
  HPCTRAIN_CHECK(value >= 0 && value < 1, "{} {}: expected 0 <= {} < 1", flag, value, what);
}

// ---- adamw_torch ----
void check_adamw(const OptimizerOptions& o) {
  check_unit_interval(o.adam_beta1, "--adam-beta1", "beta1");
  check_unit_interval(o.adam_beta2, "--adam-beta2", "beta2");
  HPCTRAIN_CHECK(o.adam_epsilon > 0 && std::isfinite(o.adam_epsilon), "--adam-epsilon {}: expected > 0", o.adam_epsilon);
}
std::unique_ptr<Optimizer> make_adamw(const OptimizerOptions& o, Groups groups) {
  AdamWOptions adamw;
  adamw.beta1 = o.adam_beta1, adamw.beta2 = o.adam_beta2, adamw.eps = o.adam_epsilon;
  return std::make_unique<AdamW>(std::move(groups), adamw);
}

int64_t numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (const int64_t size : shape) n *= size;
  return n;
}
int64_t adamw_state_bytes(const OptimizerOptions&, const std::vector<int64_t>& shape) {
  return 2 * numel(shape) * static_cast<int64_t>(sizeof(float));
}

// ---- sgd ----
void check_sgd(const OptimizerOptions& o) {
  check_unit_interval(o.sgd_momentum, "--sgd-momentum", "momentum");
  HPCTRAIN_CHECK(o.sgd_dampening >= 0 && o.sgd_dampening <= 1, "--sgd-dampening {}: expected 0 <= dampening <= 1",
                 o.sgd_dampening);
  HPCTRAIN_CHECK(!o.sgd_nesterov || (o.sgd_momentum > 0 && o.sgd_dampening == 0),
                 "--sgd-nesterov needs --sgd-momentum > 0 and --sgd-dampening 0 (got {} and {})", o.sgd_momentum,
                 o.sgd_dampening);
}
std::unique_ptr<Optimizer> make_sgd(const OptimizerOptions& o, Groups groups) {
  return std::make_unique<Sgd>(std::move(groups), SgdOptions{o.sgd_momentum, o.sgd_dampening, o.sgd_nesterov});
}

// ---- adafactor ----
void check_adafactor(const OptimizerOptions& o) {
  check_unit_interval(o.adafactor_beta1, "--adafactor-beta1", "beta1 (0: no first moment)");
  HPCTRAIN_CHECK(o.adafactor_clip_threshold > 0 && std::isfinite(o.adafactor_clip_threshold),
                 "--adafactor-clip-threshold {}: expected > 0", o.adafactor_clip_threshold);
  HPCTRAIN_CHECK(o.adafactor_decay_rate < 0 && o.adafactor_decay_rate >= -1, "--adafactor-decay-rate {}: expected "
                 "-1 <= rate < 0 (beta2 of step t is 1 - t^rate)", o.adafactor_decay_rate);
  HPCTRAIN_CHECK(o.adafactor_eps1 > 0 && std::isfinite(o.adafactor_eps1), "--adafactor-eps1 {}: expected > 0",
                 o.adafactor_eps1);
  HPCTRAIN_CHECK(o.adafactor_eps2 >= 0 && std::isfinite(o.adafactor_eps2), "--adafactor-eps2 {}: expected >= 0",
                 o.adafactor_eps2);
  HPCTRAIN_CHECK(!o.adafactor_warmup_init || o.adafactor_relative_step,
                 "--adafactor-warmup-init needs --adafactor-relative-step (as transformers' Adafactor)");
}
std::unique_ptr<Optimizer> make_adafactor(const OptimizerOptions& o, Groups groups) {
  AdafactorOptions a;
  a.eps1 = o.adafactor_eps1, a.eps2 = o.adafactor_eps2, a.clip_threshold = o.adafactor_clip_threshold;
  a.decay_rate = o.adafactor_decay_rate, a.beta1 = o.adafactor_beta1, a.scale_parameter = o.adafactor_scale_parameter;
  a.relative_step = o.adafactor_relative_step, a.warmup_init = o.adafactor_warmup_init;
  return std::make_unique<Adafactor>(std::move(groups), a);
}
int64_t sgd_state_bytes(const OptimizerOptions& o, const std::vector<int64_t>& shape) {
  // momentum_buffer (fp32) and its step counter (int64 scalar) when momentum is on
  return o.sgd_momentum != 0.0 ? numel(shape) * static_cast<int64_t>(sizeof(float)) + 8 : 0;
}
int64_t adafactor_state_bytes(const OptimizerOptions& o, const std::vector<int64_t>& shape) {
  // the step counter; row and column averages for >= 2 dimensions, else the full second moment; exp_avg
  const int64_t n = numel(shape);
  if (n == 0) return 8;
  int64_t elements = shape.size() >= 2 ? n / shape.back() + n / shape[shape.size() - 2] : n;
  if (o.adafactor_beta1 > 0) elements += n;
  return 8 + elements * static_cast<int64_t>(sizeof(float));
}

// ---- adamw_bnb_8bit (bitsandbytes' AdamW8bit; the same options as adamw_torch) ----
AdamW8bitOptions adamw_8bit_options(const OptimizerOptions& o) {
  AdamW8bitOptions adamw;
  adamw.beta1 = o.adam_beta1, adamw.beta2 = o.adam_beta2, adamw.eps = o.adam_epsilon;
  return adamw;
}
std::unique_ptr<Optimizer> make_adamw_8bit(const OptimizerOptions& o, Groups groups) {
  return std::make_unique<AdamW8bit>(std::move(groups), adamw_8bit_options(o));
}
int64_t adamw_8bit_state_bytes(const OptimizerOptions&, const std::vector<int64_t>& shape) {
  return AdamW8bit::state_bytes_for(numel(shape), AdamW8bitOptions{});
}

struct OptimizerEntry {
  std::string name;                  // the type tag (Hugging Face Trainer's --optim name)
  std::vector<std::string> aliases;  // other names --optim accepts
  void (*check)(const OptimizerOptions&);
  std::unique_ptr<Optimizer> (*make)(const OptimizerOptions&, Groups);
  // State bytes for one fp32 parameter of this shape (optimizer_state_bytes, estimate-memory).
  int64_t (*state_bytes)(const OptimizerOptions&, const std::vector<int64_t>& shape);
};

const std::vector<OptimizerEntry>& optimizer_table() {
  static const std::vector<OptimizerEntry> table = {
      {"adamw_torch", {"adamw"}, check_adamw, make_adamw, adamw_state_bytes},
      {"adafactor", {}, check_adafactor, make_adafactor, adafactor_state_bytes},
      {"sgd", {}, check_sgd, make_sgd, sgd_state_bytes},
      {"adamw_bnb_8bit", {"adamw_8bit"}, check_adamw, make_adamw_8bit, adamw_8bit_state_bytes},
  };
  return table;
}

const OptimizerEntry& find_entry(const std::string& optim) {
  for (const OptimizerEntry& entry : optimizer_table()) {
    if (entry.name == optim) return entry;
    for (const std::string& alias : entry.aliases)
      if (alias == optim) return entry;
  }
  fail("--optim '{}': unknown optimizer; expected one of {}", optim, fmt::join(optimizer_names(), ", "));
}

}  // namespace

std::vector<std::string> optimizer_names() {
  std::vector<std::string> names;
  for (const OptimizerEntry& entry : optimizer_table())
    names.push_back(entry.aliases.empty() ? entry.name
                                          : fmt::format("{} ({})", entry.name, fmt::join(entry.aliases, ", ")));
  return names;
}

std::string canonical_optimizer_name(const std::string& optim) { return find_entry(optim).name; }

void validate_optimizer_options(const OptimizerOptions& options) {
  HPCTRAIN_CHECK(std::isfinite(options.weight_decay) && options.weight_decay >= 0,
                 "--weight-decay {}: expected a finite number >= 0", options.weight_decay);
  find_entry(options.optim).check(options);
}

std::unique_ptr<Optimizer> make_optimizer(const OptimizerOptions& options, const NamedParameters& named,
                                          const std::set<std::string>& no_decay) {
  const OptimizerEntry& entry = find_entry(options.optim);
  entry.check(options);
  return entry.make(options, weight_decay_groups(named, options.weight_decay, no_decay));
}

int64_t segment_alignment(const OptimizerOptions& options, int64_t numel) {
  const bool quantized = find_entry(options.optim).name == "adamw_bnb_8bit" && numel >= AdamW8bitOptions{}.min_8bit_size;
  return quantized ? quant::kBlockSize : 1;
}

int64_t any_segment_alignment(int64_t numel) {
  return numel >= AdamW8bitOptions{}.min_8bit_size ? quant::kBlockSize : 1;  // 8-bit AdamW's, the only one above 1
}

std::unique_ptr<Optimizer> make_segment_optimizer(const OptimizerOptions& options, std::vector<ParameterGroup> groups,
                                                  const std::vector<int64_t>& full_numels) {
  const OptimizerEntry& entry = find_entry(options.optim);
  HPCTRAIN_CHECK(entry.name != "adafactor", "--optim adafactor with --zero-stage 1, 2 or 3 is not supported: Adafactor's "
                 "factored second moment needs whole matrices, and ZeRO gives each rank a slice\n  hint: use --optim "
                 "adamw_torch, adamw_bnb_8bit or sgd, or --zero-stage 0");
  entry.check(options);
  if (entry.name != "adamw_bnb_8bit") return entry.make(options, std::move(groups));
  return std::make_unique<AdamW8bit>(std::move(groups), adamw_8bit_options(options), full_numels);
}

int64_t optimizer_state_bytes(const OptimizerOptions& options, const std::vector<int64_t>& shape) {
  return find_entry(options.optim).state_bytes(options, shape);
}

}  // namespace hpctrain::optim
