#include "hpctrain/core/host_allocator.hpp"

#include <cstdlib>
#include <cstring>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace hpctrain::core {

void tune_host_allocator() {
#if defined(__GLIBC__)
  static const bool done = [] {
    const char* opt_out = std::getenv("HPCTRAIN_MALLOC_TUNING");
    if (opt_out && std::strcmp(opt_out, "0") == 0) return false;
    if (std::getenv("MALLOC_MMAP_THRESHOLD_") || std::getenv("MALLOC_TRIM_THRESHOLD_")) return false;
    constexpr int kOneGiB = 1 << 30;
    mallopt(M_MMAP_THRESHOLD, kOneGiB);
    mallopt(M_TRIM_THRESHOLD, kOneGiB);
    return true;
  }();
  (void)done;
#endif
}

}  // namespace hpctrain::core
