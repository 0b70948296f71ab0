// Counter-based dropout (dropout.hpp).
#include "models/dropout.hpp"

#include "hpctrain/core/error.hpp"
#include "hpctrain/core/random.hpp"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <torch/autograd.h>

#include <algorithm>
#include <cmath>
#include <mutex>

namespace hpctrain::models::detail {

// Note [Counter-based dropout]
// at::dropout draws one Bernoulli sample per element from LibTorch's sequential CPU generator and keeps
// the mask for backward. Measured on the DistilBERT benchmark model, those draws cost more than the
// attention's matrix products, and the masks are activation-sized memory. Here the mask bit of element
// i is a function of (seed, i): 16 bits of output i / 4 of SplitMix64(seed) (splitmix64_output). One
// seed per call comes from the default generator, so manual_seed and a resumed run's restored
// generator reproduce every mask (Note [Dropout seeds] in
// train/accelerator.hpp). Backward and attention's recomputation (Note [Attention memory]) redraw the
// mask from the seed instead of storing it, and threads can fill any range independently.
// The drop probability is quantized to multiples of 1/65536 (0.1 -> 0.1000061; the kept values are still
// scaled by 1 / (1 - p), a bias of 7e-6 relative in expectation).

namespace {

// x * keep * scale for the elements [begin, end) (begin a multiple of 4).
template <typename scalar_t>
void mask_range(scalar_t* data, int64_t begin, int64_t end, uint32_t threshold, double scale, uint64_t seed) {
  using acc_t = at::opmath_type<scalar_t>;
  const auto keep_scale = static_cast<acc_t>(scale);
  for (int64_t i = begin; i < end; i += 4) {
    uint64_t bits = splitmix64_output(seed, static_cast<uint64_t>(i / 4));
    for (int64_t j = i; j < std::min(end, i + 4); ++j, bits >>= 16) {
      data[j] = static_cast<scalar_t>((bits & 0xFFFF) >= threshold ? static_cast<acc_t>(data[j]) * keep_scale
                                                                  : acc_t(0));
    }
  }
}

void apply_on_host(at::Tensor& x, double p, uint64_t seed) {
  TORCH_INTERNAL_ASSERT(x.is_contiguous() && x.is_cpu());
  const auto threshold = static_cast<uint32_t>(std::lround(p * 65536.0));
  const double scale = p < 1 ? 1.0 / (1.0 - p) : 0.0;  // p == 1 drops everything, as at::dropout
  const int64_t n = x.numel();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "hpctrain_dropout", [&] {
    scalar_t* data = x.data_ptr<scalar_t>();
    const int64_t groups = (n + 3) / 4;
    at::parallel_for(0, groups, 8192, [&](int64_t first, int64_t last) {
      mask_range(data, first * 4, std::min(n, last * 4), threshold, scale, seed);
    });
  });
}

class Dropout : public torch::autograd::Function<Dropout> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x, double p) {
    const uint64_t seed = draw_dropout_seed();
    at::Tensor out = x.clone(at::MemoryFormat::Contiguous);
    apply_dropout_mask(out, p, seed);
    ctx->saved_data["p"] = p;
    ctx->saved_data["seed"] = static_cast<int64_t>(seed);  // IValue holds int64; the bits round-trip
    return out;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    at::Tensor grad = grad_outputs[0].clone(at::MemoryFormat::Contiguous);
    apply_dropout_mask(grad, ctx->saved_data["p"].toDouble(), static_cast<uint64_t>(ctx->saved_data["seed"].toInt()));
    return {grad, at::Tensor()};
  }
};

}  // namespace

uint64_t draw_dropout_seed() {
  at::Generator generator = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(generator.mutex());
  return generator.get<at::CPUGeneratorImpl>()->random64();
}

void apply_dropout_mask(at::Tensor& x, double p, uint64_t seed) {
  HPCTRAIN_CHECK(p >= 0 && p <= 1, "dropout probability {} out of range [0, 1]", p);
  if (x.is_cpu()) return apply_on_host(x, p, seed);
  at::Tensor host = x.cpu();  // device tensors: the same mask, applied on the host
  apply_on_host(host, p, seed);
  x.copy_(host);
}

at::Tensor seeded_dropout(const at::Tensor& x, double p, bool training) {
  if (!training || p <= 0) return x;
  if (!x.is_cpu()) return at::dropout(x, p, true);  // device kernels draw from the device's generator
  return Dropout::apply(x, p);
}

}  // namespace hpctrain::models::detail
