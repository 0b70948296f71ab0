#include "hpctrain/core/host_allocator.hpp"

#include <cstdlib>
#include <cstring>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace hpctrain::core {

namespace {

constexpr int kOneGiB = 1 << 30;
constexpr int kGlibcDefaultThreshold = 128 * 1024;  // glibc's M_MMAP_THRESHOLD and M_TRIM_THRESHOLD defaults

// Applies the tuning once; true when it is in effect.
bool host_allocator_tuned() {
#if defined(__GLIBC__)
  static const bool done = [] {
    const char* opt_out = std::getenv("HPCTRAIN_MALLOC_TUNING");
    if (opt_out && std::strcmp(opt_out, "0") == 0) return false;
    if (std::getenv("MALLOC_MMAP_THRESHOLD_") || std::getenv("MALLOC_TRIM_THRESHOLD_")) return false;
    mallopt(M_MMAP_THRESHOLD, kOneGiB);
    mallopt(M_TRIM_THRESHOLD, kOneGiB);
    return true;
  }();
  return done;
#else
  return false;
#endif
}

}  // namespace

void tune_host_allocator() { (void)host_allocator_tuned(); }

void release_free_heap_memory() {
#if defined(__GLIBC__)
  malloc_trim(0);
#endif
}

LiveTensorResidency::LiveTensorResidency() : active_(host_allocator_tuned()) {
#if defined(__GLIBC__)
  if (!active_) return;
  mallopt(M_MMAP_THRESHOLD, kGlibcDefaultThreshold);
  mallopt(M_TRIM_THRESHOLD, kGlibcDefaultThreshold);
  malloc_trim(0);  // the free memory the heap kept so far leaves the resident set too
#endif
}

LiveTensorResidency::~LiveTensorResidency() {
#if defined(__GLIBC__)
  if (!active_) return;
  mallopt(M_MMAP_THRESHOLD, kOneGiB);
  mallopt(M_TRIM_THRESHOLD, kOneGiB);
#endif
}

}  // namespace hpctrain::core
