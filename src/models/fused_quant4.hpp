// Private to src/models: a 4-bit weight's two float32 products run fused on the CPU (Note [Fused 4-bit product] in
// nf4_matmul_cpu.cpp), for the callers that run their own backward: quantized_linear's autograd Function
// (quantized_linear.cpp) and the chunked loss through a 4-bit LM head (chunked_cross_entropy.cpp, Note [Quantized
// embeddings]). Only where quant4_product_fused(cpu, float32) holds.
#pragma once

#include <ATen/core/Tensor.h>

#include "hpctrain/models/nf4.hpp"
#include "models/nf4_cpu.hpp"

namespace hpctrain::models::detail {

class FusedQuant4Weight {
 public:
  // W [out, in] in 4-bit form on the CPU; its block absmax is dequantized here, once for all products.
  explicit FusedQuant4Weight(const Quant4Weight& w);

  [[nodiscard]] int64_t out_features() const { return w_.shape[0]; }
  [[nodiscard]] int64_t in_features() const { return w_.shape[1]; }
  // y [N, out] = x [N, in] Wᵀ: x and y float32, contiguous (y may be a row range of a larger buffer).
  void linear_out(const at::Tensor& x, at::Tensor& y) const;
  // dx [N, in] = dy [N, out] W: dy and dx float32, contiguous.
  void input_grad_out(const at::Tensor& dy, at::Tensor& dx) const;

 private:
  Quant4Weight w_;
  at::Tensor absmax_;  // float32 per block, what args_ points into
  Quant4CpuArgs args_;
};

}  // namespace hpctrain::models::detail
