#include "adamw_kernel.hpp"

#include "vector_clones.hpp"

#include <cmath>

// Note [Fused AdamW]
// torch.optim.AdamW (foreach off, PyTorch 1.13) updates a parameter with five tensor operations —
// param.mul_, exp_avg.mul_().add_(), exp_avg_sq.mul_().addcmul_(), sqrt/div/add for the denominator,
// param.addcdiv_() — nine passes over memory and two temporaries. For the DistilBERT benchmark model
// that is about 1 GB of memory traffic per step, and optimizer time is memory-bound: on a node whose
// cores all train, ranks contend for memory bandwidth, so the passes cost more as ranks are added.
// This loop reads param, grad and both moments once and writes param and the moments once (7 arrays),
// with the same operations in the same order as the tensor version, each rounded in the parameter's
// dtype:
//   p = p * decay;  m = m * b1 + (1 - b1) * g;  v = v * b2 + (1 - b2) * g * g;
//   p = p + (-step_size) * m / (sqrt(v) / bias_correction2_sqrt + eps)
// Every element is computed independently with IEEE-exact operations and no contraction into FMA
// (-ffp-contract=off for this file, see CMakeLists.txt), so the result does not depend on the vector
// width the compiler or the CPU picks, nor on how the range is split among threads: ranks on different
// CPUs keep identical replicas. tests/optim/adamw_test.cpp checks it against the tensor version
// (AdamW::step keeps it for dtypes and devices the loop does not handle).

#if defined(__GNUC__)
#define HPCTRAIN_ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define HPCTRAIN_ALWAYS_INLINE inline
#endif

namespace hpctrain::optim::detail {
namespace {

// Inlined into each clone below, so each clone vectorizes the loop for its own target.
template <typename T>
HPCTRAIN_ALWAYS_INLINE void update(T* __restrict param, T* __restrict exp_avg, T* __restrict exp_avg_sq, const T* __restrict grad,
            int64_t n, const AdamWScalars& s) {
  const T decay = static_cast<T>(s.decay_factor);
  const T beta1 = static_cast<T>(s.beta1), one_minus_beta1 = static_cast<T>(1.0 - s.beta1);
  const T beta2 = static_cast<T>(s.beta2), one_minus_beta2 = static_cast<T>(1.0 - s.beta2);
  const T correction = static_cast<T>(s.bias_correction2_sqrt), eps = static_cast<T>(s.eps);
  const T neg_step = static_cast<T>(-s.step_size);
  for (int64_t i = 0; i < n; ++i) {
    const T g = grad[i];
    const T m = exp_avg[i] * beta1 + one_minus_beta1 * g;
    const T v = exp_avg_sq[i] * beta2 + one_minus_beta2 * g * g;
    const T denom = std::sqrt(v) / correction + eps;
    exp_avg[i] = m;
    exp_avg_sq[i] = v;
    param[i] = param[i] * decay + neg_step * m / denom;
  }
}

}  // namespace

// Compiled for AVX2 and for the baseline (vector_clones.hpp; same results, see the Note).
HPCTRAIN_VECTOR_CLONES
void adamw_update(float* param, float* exp_avg, float* exp_avg_sq, const float* grad, int64_t n,
                  const AdamWScalars& s) {
  update(param, exp_avg, exp_avg_sq, grad, n, s);
}

HPCTRAIN_VECTOR_CLONES
void adamw_update(double* param, double* exp_avg, double* exp_avg_sq, const double* grad, int64_t n,
                  const AdamWScalars& s) {
  update(param, exp_avg, exp_avg_sq, grad, n, s);
}

}  // namespace hpctrain::optim::detail
