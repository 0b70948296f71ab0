// LibTorch 1.13 (Debian's libtorch-dev, the default build) and LibTorch 2.x (the `torch` wheel,
// scripts/setup-torch2.sh): every difference between the two that hpctrain meets, in one place.
//
// Note [Two LibTorch versions]
// The code base builds against both; CI builds and tests both (scripts/test.sh, scripts/test-torch2.sh).
// Version-dependent code tests HPCTRAIN_TORCH_2 from this header only (never TORCH_VERSION_MAJOR
// directly, which is 0 in an #if when torch/version.h was not included), and the helpers below hide
// API changes. Seen so far:
//  - fused attention: at::scaled_dot_product_attention exists from 2.0 (models/attention.cpp);
//  - c10::Allocator: allocate() lost its const and copy_data() became pure virtual in 2.x;
//  - headers: 2.x no longer brings at::NoGradGuard (ATen/core/grad_mode.h) or fmt::join
//    (fmt/ranges.h) with ATen.h; each file includes what it uses;
//  - fmt: the wheel bundles its own fmt headers (Note [fmt beside LibTorch 2.x], cmake/libtorch.cmake);
//  - autocast: 1.13 has per-device functions (set_cpu_enabled, set_autocast_cpu_dtype, set_enabled for
//    CUDA), 2.x takes the device type (set_autocast_enabled(device, ...)): AutocastScope below.
#pragma once

#include <ATen/autocast_mode.h>
#include <c10/core/Allocator.h>
#include <c10/core/DeviceType.h>
#include <c10/core/ScalarType.h>
#include <torch/version.h>

#include <cstddef>
#include <cstring>

#if TORCH_VERSION_MAJOR >= 2
#define HPCTRAIN_TORCH_2 1
#else
#define HPCTRAIN_TORCH_2 0
#endif

namespace hpctrain::compat {

// A c10::Allocator written once for both versions: derived classes implement allocate_bytes().
class Allocator : public c10::Allocator {
 public:
#if HPCTRAIN_TORCH_2
  c10::DataPtr allocate(std::size_t bytes) override { return allocate_bytes(bytes); }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    if (count > 0) std::memcpy(dest, src, count);
  }
#else
  c10::DataPtr allocate(std::size_t bytes) const override { return allocate_bytes(bytes); }
#endif

 protected:
  virtual c10::DataPtr allocate_bytes(std::size_t bytes) const = 0;
};

// torch.autocast(device, dtype, enabled) as a scope: `enabled` casts the autocast ops of `device` (CPU or
// CUDA) to `dtype` until the scope ends; `enabled == false` opens an fp32 island inside an autocast region.
// The previous state is restored at the end, and the cache of cast weights cleared when the outermost
// scope ends (as the Python context manager does).
class AutocastScope {
 public:
  AutocastScope(c10::DeviceType device, bool enabled, c10::ScalarType dtype = c10::kBFloat16)
      : device_(device), was_enabled_(is_enabled(device)), previous_dtype_(get_dtype(device)) {
    set(device_, enabled, enabled ? dtype : previous_dtype_);
    at::autocast::increment_nesting();
  }
  ~AutocastScope() {
    if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
    set(device_, was_enabled_, previous_dtype_);
  }
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

  [[nodiscard]] static bool is_enabled(c10::DeviceType device) {
#if HPCTRAIN_TORCH_2
    return at::autocast::is_autocast_enabled(device);
#else
    return device == c10::DeviceType::CUDA ? at::autocast::is_enabled() : at::autocast::is_cpu_enabled();
#endif
  }

 private:
  static c10::ScalarType get_dtype(c10::DeviceType device) {
#if HPCTRAIN_TORCH_2
    return at::autocast::get_autocast_dtype(device);
#else
    return device == c10::DeviceType::CUDA ? at::autocast::get_autocast_gpu_dtype()
                                           : at::autocast::get_autocast_cpu_dtype();
#endif
  }
  static void set(c10::DeviceType device, bool enabled, c10::ScalarType dtype) {
#if HPCTRAIN_TORCH_2
    at::autocast::set_autocast_enabled(device, enabled);
    at::autocast::set_autocast_dtype(device, dtype);
#else
    if (device == c10::DeviceType::CUDA) {
      at::autocast::set_enabled(enabled);
      at::autocast::set_autocast_gpu_dtype(dtype);
    } else {
      at::autocast::set_cpu_enabled(enabled);
      at::autocast::set_autocast_cpu_dtype(dtype);
    }
#endif
  }

  c10::DeviceType device_;
  bool was_enabled_;
  c10::ScalarType previous_dtype_;
};

}  // namespace hpctrain::compat
