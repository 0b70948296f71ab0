// Deterministic random numbers and shuffles, identical on every compiler and platform
// (std:: distributions are implementation-defined, so shuffles that ranks or files depend on never use them).
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace hpctrain {

// SplitMix64: a small, well-mixed 64-bit generator; also used to derive independent seeds.
// Its n-th output is a function of (seed, n) alone (splitmix64_output), so ranges of the stream can be
// computed in any order, e.g. by several threads.
inline constexpr uint64_t kSplitMix64Gamma = 0x9E3779B97F4A7C15ull;

inline uint64_t splitmix64_mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Output `index` (0-based) of SplitMix64(seed), without generating the ones before it.
inline uint64_t splitmix64_output(uint64_t seed, uint64_t index) {
  return splitmix64_mix(seed + (index + 1) * kSplitMix64Gamma);
}

class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t next() { return splitmix64_mix(state_ += kSplitMix64Gamma); }
  // Uniform integer in [0, bound) without modulo bias (Lemire's method with rejection).
  uint64_t below(uint64_t bound) {
    if (bound <= 1) return 0;
    const uint64_t threshold = (0 - bound) % bound;
    for (;;) {
      const uint64_t r = next();
      const __uint128_t m = static_cast<__uint128_t>(r) * bound;
      if (static_cast<uint64_t>(m) >= threshold) return static_cast<uint64_t>(m >> 64);
    }
  }

 private:
  uint64_t state_;
};

// A seed for one purpose derived from a base seed and up to two integers (e.g. seed, epoch, rank).
inline uint64_t derive_seed(uint64_t seed, uint64_t a, uint64_t b = 0) {
  SplitMix64 mix(seed ^ (a * 0xD1B54A32D192ED03ull) ^ (b * 0x8CB92BA72F3D8DD7ull));
  mix.next();
  return mix.next();
}

// Fisher–Yates shuffle driven by SplitMix64.
template <typename T>
void shuffle(std::vector<T>& items, uint64_t seed) {
  SplitMix64 rng(seed);
  for (std::size_t i = items.size(); i > 1; --i) {
    const std::size_t j = static_cast<std::size_t>(rng.below(i));
    std::swap(items[i - 1], items[j]);
  }
}

}  // namespace hpctrain
