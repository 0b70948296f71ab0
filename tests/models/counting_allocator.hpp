// Test helper: the peak bytes LibTorch's CPU allocator hands out while a function runs (activation memory).
#pragma once

#include "hpctrain/compat/torch.hpp"

#include <c10/core/CPUAllocator.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <new>
#include <functional>

namespace hpctrain::models::testing {

// Counts the bytes the CPU allocator has handed out and not yet got back, and their peak. Each block carries
// its size in a 64-byte header before the data, so data == context and raw_allocate works (GELU uses it).
class PeakCountingAllocator final : public hpctrain::compat::Allocator {
 public:
  c10::DataPtr allocate_bytes(size_t n) const override {
    auto* base = static_cast<uint8_t*>(std::aligned_alloc(kHeader, (n + 2 * kHeader - 1) / kHeader * kHeader));
    if (base == nullptr) throw std::bad_alloc();
    *reinterpret_cast<size_t*>(base) = n;
    void* data = base + kHeader;
    const size_t now = live_.fetch_add(n) + n;
    size_t peak = peak_.load();
    while (now > peak && !peak_.compare_exchange_weak(peak, now)) {
    }
    return {data, data, &release, c10::Device(c10::kCPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &release; }
  void reset_peak() { peak_ = live_.load(); }
  size_t live() const { return live_; }
  size_t peak() const { return peak_; }

 private:
  static constexpr size_t kHeader = 64;  // keeps the data 64-byte aligned, as c10's allocator does
  static void release(void* data) {
    if (data == nullptr) return;
    uint8_t* base = static_cast<uint8_t*>(data) - kHeader;
    live_ -= *reinterpret_cast<size_t*>(base);
    std::free(base);
  }
  static inline std::atomic<size_t> live_{0};
  static inline std::atomic<size_t> peak_{0};
};

// The counting allocator, installed as LibTorch's CPU allocator for the guard's lifetime.
class CountingScope {
 public:
  CountingScope() : original_(c10::GetCPUAllocator()) {
    static PeakCountingAllocator shared;
    counting_ = &shared;
    c10::SetCPUAllocator(counting_, ++priority());
    start_ = counting_->live();
    counting_->reset_peak();
  }
  ~CountingScope() { c10::SetCPUAllocator(original_, ++priority()); }
  CountingScope(const CountingScope&) = delete;
  CountingScope& operator=(const CountingScope&) = delete;
  size_t peak() const { return counting_->peak() - start_; }  // above the level at construction
  size_t live() const {  // blocks of an earlier scope freed meanwhile may take it below the start
    const size_t now = counting_->live();
    return now > start_ ? now - start_ : 0;
  }

 private:
  static uint8_t& priority() {
    static uint8_t value = 100;  // SetCPUAllocator ignores calls below the last priority
    return value;
  }
  c10::Allocator* original_;
  PeakCountingAllocator* counting_ = nullptr;
  size_t start_ = 0;
};

// Peak bytes allocated above the starting level while `step` runs.
inline size_t peak_bytes_during(const std::function<void()>& step) {
  CountingScope scope;
  step();
  return scope.peak();
}

// Bytes allocated by `step` and still held when it returns (e.g. the activations a forward keeps).
inline size_t bytes_kept_by(const std::function<void()>& step) {
  CountingScope scope;
  step();
  return scope.live();
}

}  // namespace hpctrain::models::testing
