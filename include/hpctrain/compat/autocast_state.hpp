// The autocast state of the calling thread (enabled flag and lower-precision dtype per device type), captured
// and re-entered: LibTorch 1.13 names it per device (is_cpu_enabled, get_autocast_cpu_dtype), 2.x takes the
// device type as an argument and deprecates the old names (Note [Two LibTorch versions] in compat/torch.hpp).
#pragma once

#include "hpctrain/compat/torch.hpp"

#include <ATen/autocast_mode.h>

namespace hpctrain::compat {

struct AutocastState {
  bool cpu_enabled = false, cuda_enabled = false;
  at::ScalarType cpu_dtype = at::kBFloat16, cuda_dtype = at::kHalf;
  bool cache_enabled = true;

  [[nodiscard]] static AutocastState current() {
    AutocastState s;
#if HPCTRAIN_TORCH_2
    s.cpu_enabled = at::autocast::is_autocast_enabled(at::kCPU);
    s.cuda_enabled = at::autocast::is_autocast_enabled(at::kCUDA);
    s.cpu_dtype = at::autocast::get_autocast_dtype(at::kCPU);
    s.cuda_dtype = at::autocast::get_autocast_dtype(at::kCUDA);
#else
    s.cpu_enabled = at::autocast::is_cpu_enabled();
    s.cuda_enabled = at::autocast::is_enabled();
    s.cpu_dtype = at::autocast::get_autocast_cpu_dtype();
    s.cuda_dtype = at::autocast::get_autocast_gpu_dtype();
#endif
    s.cache_enabled = at::autocast::is_autocast_cache_enabled();
    return s;
  }

  void make_current() const {
#if HPCTRAIN_TORCH_2
    at::autocast::set_autocast_enabled(at::kCPU, cpu_enabled);
    at::autocast::set_autocast_enabled(at::kCUDA, cuda_enabled);
    at::autocast::set_autocast_dtype(at::kCPU, cpu_dtype);
    at::autocast::set_autocast_dtype(at::kCUDA, cuda_dtype);
#else
    at::autocast::set_cpu_enabled(cpu_enabled);
    at::autocast::set_enabled(cuda_enabled);
    at::autocast::set_autocast_cpu_dtype(cpu_dtype);
    at::autocast::set_autocast_gpu_dtype(cuda_dtype);
#endif
    at::autocast::set_autocast_cache_enabled(cache_enabled);
  }
};

// Runs with `state` as the autocast state for its lifetime, then restores the previous one.
class AutocastStateGuard {
 public:
  explicit AutocastStateGuard(const AutocastState& state) : previous_(AutocastState::current()) { state.make_current(); }
  ~AutocastStateGuard() { previous_.make_current(); }
  AutocastStateGuard(const AutocastStateGuard&) = delete;
  AutocastStateGuard& operator=(const AutocastStateGuard&) = delete;

 private:
  AutocastState previous_;
};

}  // namespace hpctrain::compat
