// measure_peak_flops (peak_flops.hpp).
#include "hpctrain/train/peak_flops.hpp"

#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>


namespace hpctrain::train {

double measure_peak_flops(at::Device device, c10::ScalarType dtype, int64_t size, double seconds) {
  using Clock = std::chrono::steady_clock;
  const auto options = at::TensorOptions().device(device).dtype(dtype);
  const at::Tensor a = at::randn({size, size}, options), b = at::randn({size, size}, options);
  at::Tensor c = at::mm(a, b);  // warm-up: the kernel chosen, the threads started
  const auto synchronize = [&] { (void)c.sum().item<double>(); };
  synchronize();
  const double per_product = 2.0 * static_cast<double>(size) * static_cast<double>(size) * static_cast<double>(size);
  double best = 0;
  for (int round = 0; round < 3; ++round) {
    int64_t products = 0;
    const auto start = Clock::now();
    double elapsed = 0;
    while (elapsed < seconds / 3) {
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

}  // namespace hpctrain::train
