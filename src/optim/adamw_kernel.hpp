// One fused AdamW update over a contiguous range of elements (Note [Fused AdamW] in adamw_kernel.cpp).
// Plain loops over raw arrays, no LibTorch: AdamW::step splits the elements across intra-op threads.
#pragma once

#include <cmath>
#include <cstdint>

namespace hpctrain::optim::detail {

// The step's scalars, computed once in double like torch.optim.AdamW computes them in Python.
struct AdamWScalars {
  double decay_factor = 1.0;   // 1 - lr * weight_decay, or 1 for parameters without decay
  double beta1 = 0.9, beta2 = 0.999;
  double bias_correction2_sqrt = 1.0;
  double eps = 1e-8;
  double step_size = 0.0;      // lr / bias_correction1
};

// The scalars of step `step` (1-based) with learning rate lr; decay_factor is left at 1 (set per parameter).
inline AdamWScalars adamw_scalars(double beta1, double beta2, double eps, int64_t step, double lr) {
  AdamWScalars s;
  s.beta1 = beta1, s.beta2 = beta2, s.eps = eps;
  s.bias_correction2_sqrt = std::sqrt(1.0 - std::pow(beta2, static_cast<double>(step)));
  s.step_size = lr / (1.0 - std::pow(beta1, static_cast<double>(step)));
  return s;
}

// param, exp_avg, exp_avg_sq updated in place from grad, for elements [0, n) of each array.
void adamw_update(float* param, float* exp_avg, float* exp_avg_sq, const float* grad, int64_t n,
                  const AdamWScalars& s);
void adamw_update(double* param, double* exp_avg, double* exp_avg_sq, const double* grad, int64_t n,
                  const AdamWScalars& s);

}  // namespace hpctrain::optim::detail
