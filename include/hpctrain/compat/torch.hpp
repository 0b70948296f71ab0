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
//  - fmt: the wheel bundles its own fmt headers (Note [fmt beside LibTorch 2.x], cmake/libtorch.cmake).
#pragma once

#include <c10/core/Allocator.h>
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

}  // namespace hpctrain::compat
