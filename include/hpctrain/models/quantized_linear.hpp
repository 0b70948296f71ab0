// A frozen linear layer whose weight is held in 4-bit form (models/nf4.hpp) and dequantized only for its matrix
// product (Note [Quantized base]): the product op and the module that holds the 4-bit tensors inside a LoRA layer.
//
// Note [Quantized base]
// QLoRA (--quantize-base, Note [LoRA] in lora.hpp): the frozen base weight of every LoRA layer that does not train
// (every LoraTarget but the modules to save; embeddings, norms and the output head are plain modules and stay as
// they are, unless --quantize-embeddings: Note [Quantized embeddings]) is replaced, after the adapters are attached
// (as it is loaded: Note [Quantized at load]), by its bitsandbytes 4-bit form: the layer's `weight`
// parameter keeps its name with no elements, and a submodule `base_4bit` (Quant4State) holds the codes and
// absmax as buffers, so they move with the model to its device and are broadcast with it. quantized_linear
// computes x Wᵀ + b inside an autograd Function: the forward dequantizes W into the compute dtype (float32, or
// autocast's bfloat16) for the product and lets it go; the backward dequantizes it again for the input gradient
// grad_y W. No full-precision copy of the weight lives between forward and backward (in float32 on an AVX-512 CPU
// none lives at all: the weight is dequantized slice by slice into the product's cache-sized panels, Note [Fused
// 4-bit product] in nf4_matmul_cpu.cpp; otherwise a layer's dequantized weight is dead once its own product
// returns, and on the CPU it is written into one reused buffer per thread, Note [Dequantization buffer] in
// quantized_linear.cpp), and the base gets no weight gradient. GPT-2's Conv1D weight [in, out] is
// quantized transposed, as [out, in], as transformers' Bnb4bitQuantize does, so codes equal bitsandbytes'.
// Merging (merge_lora) first dequantizes the weight back into a float32 parameter.
#pragma once

#include "hpctrain/models/nf4.hpp"

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <torch/nn/module.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace hpctrain::models {

// x Wᵀ + b (x [..., in], W [out, in] in 4-bit form, b [out] or undefined), W dequantized for the product only
// (Note [Quantized base]); in the dtype autocast gives the product (bfloat16 under CPU bf16 autocast), else x's.
// Differentiable in x; W and b are frozen (Error when b requires grad).
[[nodiscard]] at::Tensor quantized_linear(const at::Tensor& x, const Quant4Weight& weight, const at::Tensor& bias);
// The dtype a 4-bit weight on `device` is dequantized into for a product now: autocast's lower precision when it is
// on for the device, else `otherwise` (quantized_linear: x's dtype; the LM head: float32).
[[nodiscard]] at::ScalarType quant4_product_dtype(const c10::Device& device, at::ScalarType otherwise = at::kFloat);
// Whether quantized_linear's products in `dtype` on `device` run fused, never holding the weight in full precision
// (Note [Fused 4-bit product] in nf4_matmul_cpu.cpp: float32 on a CPU with AVX-512), rather than dequantizing it whole
// first (Note [Dequantization buffer]).
[[nodiscard]] bool quant4_product_fused(const c10::Device& device, at::ScalarType dtype);

// The 4-bit tensors of one layer as buffers (codes, absmax, and nested: absmax2, offset). It moves with the model
// to a device, but a cast of the model to another dtype leaves it as it is (its buffers are codes, not values).
class Quant4StateImpl : public torch::nn::Module {
 public:
  explicit Quant4StateImpl(const Quant4Weight& weight);
  // The weight, with the buffers as they are now (on the module's device).
  [[nodiscard]] Quant4Weight weight() const;
  [[nodiscard]] const std::vector<int64_t>& shape() const { return shape_; }

  void to(torch::Device device, torch::Dtype dtype, bool non_blocking = false) override;
  void to(torch::Dtype dtype, bool non_blocking = false) override;
  void to(torch::Device device, bool non_blocking = false) override;

 private:
  at::Tensor codes_, absmax_, absmax2_, offset_;
  std::vector<int64_t> shape_;
  Quant4Options options_;
};

// The two moves of a frozen module's weight into and out of 4-bit form, shared by LoRA layers (Note [Quantized
// base]) and token embeddings (Note [Quantized embeddings]): hold_4bit quantizes `weight` (as `out_in`, its [out, in]
// view: transposed for GPT-2's Conv1D) into a Quant4State submodule "base_4bit" of `owner` on the weight's device,
// and frees the full-precision values (`weight` keeps its name with no elements); restore_from_4bit writes the
// dequantized values back (transposed back when `transposed`) and removes the submodule.
std::shared_ptr<Quant4StateImpl> hold_4bit(torch::nn::Module& owner, at::Tensor& weight, const at::Tensor& out_in,
                                           const Quant4Options& options, const std::string& name);
void restore_from_4bit(torch::nn::Module& owner, at::Tensor& weight, const Quant4Weight& quantized, bool transposed);
inline constexpr const char* kQuant4Submodule = "base_4bit";

}  // namespace hpctrain::models
