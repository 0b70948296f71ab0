// measure_peak_flops and MfuPeak (peak_flops.hpp, Note [MFU never above 100 %]).
#include "hpctrain/train/peak_flops.hpp"

#include <ATen/ATen.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>

namespace hpctrain::train {
namespace {

// The best rate of `rounds` rounds of size x size products, each about `seconds` long.
double best_rate(at::Device device, c10::ScalarType dtype, int64_t size, double seconds, int rounds) {
  using Clock = std::chrono::steady_clock;
  const auto options = at::TensorOptions().device(device).dtype(dtype);
  const at::Tensor a = at::randn({size, size}, options), b = at::randn({size, size}, options);
  at::Tensor c = at::mm(a, b);  // warm-up: the kernel chosen, the threads started
  const auto synchronize = [&] { (void)c.sum().item<double>(); };
  synchronize();
  const double per_product = 2.0 * static_cast<double>(size) * static_cast<double>(size) * static_cast<double>(size);
  double best = 0;
  for (int round = 0; round < rounds; ++round) {
    int64_t products = 0;
    const auto start = Clock::now();
    double elapsed = 0;
    while (elapsed < seconds) {
      at::mm_out(c, a, b);
      ++products;
      if (device.is_cuda() && products % 16 != 0) continue;
      synchronize();
      elapsed = std::chrono::duration<double>(Clock::now() - start).count();
    }
    best = std::max(best, per_product * static_cast<double>(products) / elapsed);
  }
  return best;
}

}  // namespace

double measure_peak_flops(at::Device device, c10::ScalarType dtype, int64_t size, double seconds, int rounds) {
  const double per_round = seconds / (2.0 * std::max(rounds, 1));
  return std::max(best_rate(device, dtype, std::min<int64_t>(512, size), per_round, rounds),
                  best_rate(device, dtype, size, per_round, rounds));
}

MfuPeak::Reading MfuPeak::read(double flops_per_second) {
  Reading reading;
  if (!(peak_ > 0) || !(flops_per_second >= 0)) return reading;
  if (flops_per_second <= peak_) {
    reading.mfu = flops_per_second / peak_;
    return reading;
  }
  reading.mfu = 1.0;
  const bool first = !noted_;
  noted_ = true;
  if (measured_) {
    reading.peak_raised = true;
    if (first)
      reading.note = fmt::format("MFU: training ran at {:.1f} GFLOP/s, above the peak of {:.1f} GFLOP/s measured at "
                                 "start-up (the machine was busier then): the peak is now the rate reached (MFU shown "
                                 "as at most 100 %)", flops_per_second / 1e9, peak_ / 1e9);
    peak_ = flops_per_second;
  } else {
    reading.clamped = true;
    if (first)
      reading.note = fmt::format("MFU: training ran at {:.1f} GFLOP/s, above the --peak-tflops figure ({:.1f} GFLOP/s "
                                 "in all): MFU is shown as 100 % and flagged \"mfu_clamped\" in metrics.jsonl; is the "
                                 "figure the peak of the dtype trained in?", flops_per_second / 1e9, peak_ / 1e9);
  }
  return reading;
}

}  // namespace hpctrain::train
