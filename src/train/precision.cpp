// Mixed-precision options, the dynamic loss scaler and the precision policy (precision.hpp).
#include "hpctrain/train/precision.hpp"

#include <fmt/format.h>

#include <cmath>
#include <fstream>
#include <sstream>

#include "hpctrain/core/error.hpp"

namespace hpctrain::train {

MixedPrecision parse_mixed_precision(std::string_view text) {
  if (text == "no") return MixedPrecision::no;
  if (text == "bf16") return MixedPrecision::bf16;
  if (text == "fp16") return MixedPrecision::fp16;
  fail("--mixed-precision '{}': expected no, bf16 or fp16", text);
}

std::string_view to_string(MixedPrecision value) {
  switch (value) {
    case MixedPrecision::bf16: return "bf16";
    case MixedPrecision::fp16: return "fp16";
    case MixedPrecision::no: break;
  }
  return "no";
}

LossScaling parse_loss_scaling(std::string_view text) {
  if (text == "auto") return LossScaling::automatic;
  if (text == "dynamic") return LossScaling::dynamic;
  fail("--loss-scale '{}': expected auto (dynamic with --mixed-precision fp16, none otherwise) or dynamic", text);
}

std::string_view to_string(LossScaling value) { return value == LossScaling::dynamic ? "dynamic" : "auto"; }

GradReduceDtype parse_grad_reduce_dtype(std::string_view text) {
  if (text == "fp32") return GradReduceDtype::fp32;
  if (text == "bf16") return GradReduceDtype::bf16;
  fail("--grad-reduce-dtype '{}': expected fp32 or bf16", text);
}

std::string_view to_string(GradReduceDtype value) { return value == GradReduceDtype::bf16 ? "bf16" : "fp32"; }

DynamicLossScaler::DynamicLossScaler(Options options) : options_(options) {
  HPCTRAIN_CHECK(options_.init_scale > 0 && std::isfinite(options_.init_scale) && options_.growth_factor > 1 &&
                 options_.backoff_factor > 0 && options_.backoff_factor < 1 && options_.growth_interval >= 1,
                 "DynamicLossScaler: expected init_scale > 0, growth_factor > 1, 0 < backoff_factor < 1 and "
                 "growth_interval >= 1 (got {}, {}, {}, {})", options_.init_scale, options_.growth_factor,
                 options_.backoff_factor, options_.growth_interval);
  state_.scale = options_.init_scale;
}

void DynamicLossScaler::update(bool found_inf) {
  if (found_inf) {
    state_.scale *= options_.backoff_factor;
    state_.growth_tracker = 0;
    return;
  }
  if (++state_.growth_tracker == options_.growth_interval) {
    state_.scale *= options_.growth_factor;
    state_.growth_tracker = 0;
  }
}

nlohmann::json DynamicLossScaler::to_json() const {
  return {{"scale", state_.scale}, {"growth_tracker", state_.growth_tracker}};
}

void DynamicLossScaler::load_json(const nlohmann::json& json, const std::string& where) {
  HPCTRAIN_CHECK(json.is_object() && json.contains("scale") && json["scale"].is_number() &&
                 json.contains("growth_tracker") && json["growth_tracker"].is_number_integer(),
                 "{}: expected {{\"scale\": number, \"growth_tracker\": integer}}, got {}", where, json.dump());
  const double scale = json["scale"].get<double>();
  const int64_t tracker = json["growth_tracker"].get<int64_t>();
  HPCTRAIN_CHECK(scale > 0 && std::isfinite(scale), "{}: scale {}: expected a finite number > 0", where, scale);
  HPCTRAIN_CHECK(tracker >= 0 && tracker < options_.growth_interval, "{}: growth_tracker {}: expected 0 <= n < {}",
                 where, tracker, options_.growth_interval);
  state_ = State{scale, tracker};
}

PrecisionPolicy::PrecisionPolicy(MixedPrecision mixed_precision, LossScaling loss_scaling,
                                 GradReduceDtype grad_reduce_dtype, c10::DeviceType device)
    : mixed_precision_(mixed_precision), grad_reduce_dtype_(grad_reduce_dtype), device_(device) {
  HPCTRAIN_CHECK(mixed_precision != MixedPrecision::fp16 || device == c10::DeviceType::CUDA,
                 "--mixed-precision fp16 needs --device cuda: LibTorch's CPU autocast has no float16 kernels (this "
                 "rank's device is {})\n  hint: use --mixed-precision bf16 on CPUs (native on AVX512-BF16 / AMX); "
                 "--loss-scale dynamic tests loss scaling on a CPU", c10::DeviceTypeName(device, /*lower_case=*/true));
  if (mixed_precision == MixedPrecision::fp16 || loss_scaling == LossScaling::dynamic) scaler_.emplace();
}

std::optional<c10::ScalarType> PrecisionPolicy::autocast_dtype() const {
  switch (mixed_precision_) {
    case MixedPrecision::bf16: return c10::kBFloat16;
    case MixedPrecision::fp16: return c10::kHalf;
    case MixedPrecision::no: break;
  }
  return std::nullopt;
}

dist::DType PrecisionPolicy::gradient_wire_dtype() const {
  return grad_reduce_dtype_ == GradReduceDtype::bf16 ? dist::DType::bf16 : dist::DType::f32;
}

std::string PrecisionPolicy::startup_note() const {
  if (mixed_precision_ != MixedPrecision::bf16 || device_ != c10::DeviceType::CPU) return "";
  const std::string flags = native_bf16_flags();
  if (!flags.empty()) return fmt::format("--mixed-precision bf16: the CPU has native bf16 ({})", flags);
  return "--mixed-precision bf16: this CPU has no native bf16 (neither avx512_bf16 nor amx_bf16 in /proc/cpuinfo): "
         "bf16 matrix products are emulated, slower than fp32";
}

std::string bf16_flags_of(std::string_view cpuinfo_flags) {
  std::istringstream words{std::string(cpuinfo_flags)};
  std::string found;
  for (std::string word; words >> word;) {
    if (word == "avx512_bf16" || word == "amx_bf16") found += (found.empty() ? "" : " ") + word;
  }
  return found;
}

std::string native_bf16_flags() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    if (line.rfind("flags", 0) == 0) return bf16_flags_of(line);
  }
  return "";
}

}  // namespace hpctrain::train
