// Mixed precision: the options (--mixed-precision, --loss-scale, --grad-reduce-dtype), the dynamic loss scaler
// and the policy an Accelerator owns (autocast region, the dtype gradients are averaged in, loss scaling). Weights, the gradients the optimizer sees and its
// state stay float32 (master weights); autocast casts copies of the weights for the matrix products.
#pragma once

#include <c10/core/DeviceType.h>
#include <c10/core/ScalarType.h>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "hpctrain/dist/comm.hpp"

namespace hpctrain::train {

// Accelerate's --mixed_precision names.
enum class MixedPrecision { no, bf16, fp16 };
// auto: dynamic loss scaling with fp16, none otherwise; dynamic: also with bf16 or fp32 compute (the CPU
// path that tests the scaler, since fp16 kernels need CUDA).
enum class LossScaling { automatic, dynamic };

// --grad-reduce-dtype: the dtype gradients travel in while the ranks average them (fp32, or bf16: half the
// bytes; Note [bf16 gradient reduction] in src/ddp/bucket_reduce.cpp).
enum class GradReduceDtype { fp32, bf16 };

[[nodiscard]] MixedPrecision parse_mixed_precision(std::string_view text);  // Error naming --mixed-precision
[[nodiscard]] std::string_view to_string(MixedPrecision value);
[[nodiscard]] LossScaling parse_loss_scaling(std::string_view text);  // Error naming --loss-scale
[[nodiscard]] std::string_view to_string(LossScaling value);
[[nodiscard]] GradReduceDtype parse_grad_reduce_dtype(std::string_view text);  // Error naming --grad-reduce-dtype
[[nodiscard]] std::string_view to_string(GradReduceDtype value);

// Dynamic loss scaling with torch.cuda.amp.GradScaler's semantics: the loss is multiplied by scale()
// before backward; a step whose (unscaled) gradients hold inf/NaN is skipped and the scale multiplied by
// backoff_factor; after growth_interval consecutive clean steps it is multiplied by growth_factor.
class DynamicLossScaler {
 public:
  struct Options {
    double init_scale = 65536.0;  // 2^16
    double growth_factor = 2.0;
    double backoff_factor = 0.5;
    int64_t growth_interval = 2000;
  };
  struct State {
    double scale = 65536.0;
    int64_t growth_tracker = 0;  // clean steps since the last change of scale
  };

  DynamicLossScaler() : DynamicLossScaler(Options{}) {}
  explicit DynamicLossScaler(Options options);

  [[nodiscard]] double scale() const { return state_.scale; }
  [[nodiscard]] const State& state() const { return state_; }
  // After every optimizer step, taken or skipped: found_inf says whether its gradients were not finite.
  void update(bool found_inf);

  // {"scale": ..., "growth_tracker": ...}, as saved in checkpoints (kScalerName).
  [[nodiscard]] nlohmann::json to_json() const;
  // Error naming `where` and the field when the state is not a positive finite scale and a tracker in
  // [0, growth_interval).
  void load_json(const nlohmann::json& json, const std::string& where);

 private:
  Options options_;
  State state_;
};

// The file of a checkpoint folder that holds the scaler's state (Accelerator::save_state).
inline constexpr const char* kScalerName = "scaler.json";

// What one Accelerator does about precision, decided once from its options and device.
class PrecisionPolicy {
 public:
  // Error naming --mixed-precision for fp16 on a CPU (LibTorch's CPU autocast has no float16 kernels).
  PrecisionPolicy(MixedPrecision mixed_precision, LossScaling loss_scaling, GradReduceDtype grad_reduce_dtype,
                  c10::DeviceType device);
  PrecisionPolicy()
      : PrecisionPolicy(MixedPrecision::no, LossScaling::automatic, GradReduceDtype::fp32, c10::DeviceType::CPU) {}

  [[nodiscard]] MixedPrecision mixed_precision() const { return mixed_precision_; }
  // The dtype of the autocast region (forward and loss); nullopt: no autocast.
  [[nodiscard]] std::optional<c10::ScalarType> autocast_dtype() const;
  [[nodiscard]] c10::DeviceType device() const { return device_; }
  // The dtype the gradient reducer sends gradients in (dist::DType::f32 or bf16); the averages it writes
  // into .grad stay float32.
  [[nodiscard]] dist::DType gradient_wire_dtype() const;
  // The loss scaler, when the loss is scaled (fp16, or --loss-scale dynamic); else null.
  [[nodiscard]] DynamicLossScaler* scaler() { return scaler_ ? &*scaler_ : nullptr; }
  [[nodiscard]] const DynamicLossScaler* scaler() const { return scaler_ ? &*scaler_ : nullptr; }
  // A line to log once at start-up ("" when none): bf16 on a CPU without avx512_bf16 / amx_bf16.
  [[nodiscard]] std::string startup_note() const;

 private:
  MixedPrecision mixed_precision_;
  GradReduceDtype grad_reduce_dtype_;
  c10::DeviceType device_;
  std::optional<DynamicLossScaler> scaler_;
};

// The bf16 instructions /proc/cpuinfo lists for this CPU ("avx512_bf16 amx_bf16", "" when none).
[[nodiscard]] std::string native_bf16_flags();
// Pure: the bf16 flags among a /proc/cpuinfo "flags" line's words.
[[nodiscard]] std::string bf16_flags_of(std::string_view cpuinfo_flags);

}  // namespace hpctrain::train
