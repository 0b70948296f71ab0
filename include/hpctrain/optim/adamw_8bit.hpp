// 8-bit AdamW ("adamw_bnb_8bit", alias "adamw_8bit"): bitsandbytes' AdamW8bit on CPU. Both moments of a
// parameter with at least min_8bit_size elements are stored blockwise-quantized in 8 bits
// (blockwise_quant.hpp: the signed dynamic map for exp_avg, the unsigned one for exp_avg_sq, one float32
// absmax per 256 elements); smaller parameters keep float32 moments, as bitsandbytes does. Each step
// dequantizes a block, applies the AdamW update in float32 and requantizes it (Note [Fused 8-bit AdamW]).
// Parameters: float32, contiguous, on the CPU or — in a build with -DHPCTRAIN_WITH_CUDA=ON — on a CUDA device,
// where a kernel does the same arithmetic (Note [8-bit AdamW on CUDA]); Error naming the parameter otherwise.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

#include "hpctrain/optim/optimizer.hpp"

namespace hpctrain::optim {

struct AdamW8bitOptions {
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;  // Hugging Face Trainer's (bitsandbytes' too)
  int64_t min_8bit_size = 4096;                   // elements; smaller parameters keep float32 state
};

class AdamW8bit final : public Optimizer {
 public:
  AdamW8bit(std::vector<ParameterGroup> groups, AdamW8bitOptions options);
  // Over segments of parameters (ZeRO): a segment's moments are 8-bit when its whole parameter's
  // `full_numels` (one per tensor, group order) reaches min_8bit_size; each segment must start on a block
  // boundary of its parameter (Note [ZeRO slices] in src/dist/zero_slices.cpp).
  AdamW8bit(std::vector<ParameterGroup> groups, AdamW8bitOptions options, const std::vector<int64_t>& full_numels);

  [[nodiscard]] std::string type() const override { return "adamw_bnb_8bit"; }
  [[nodiscard]] nlohmann::json hyperparameters() const override;
  [[nodiscard]] const AdamW8bitOptions& options() const { return options_; }

  // Bytes of state for a parameter of `numel` elements (what state_bytes() adds up; estimate-memory).
  [[nodiscard]] static int64_t state_bytes_for(int64_t numel, const AdamW8bitOptions& options);

 private:
  // State per parameter <name>: quantized ones "exp_avg.<name>", "exp_avg_sq.<name>" (uint8, the
  // parameter's shape) with "exp_avg_absmax.<name>", "exp_avg_sq_absmax.<name>" (float32, one per block);
  // small ones "exp_avg.<name>", "exp_avg_sq.<name>" (float32). The base adds "step".
  void update(double lr) override;
  [[nodiscard]] OptimizerState state_tensors() const override;
  [[nodiscard]] std::set<std::string> non_negative_state() const override {
    return {"exp_avg_sq", "exp_avg_absmax", "exp_avg_sq_absmax"};
  }

  struct Slot {
    std::string name;
    at::Tensor param;
    at::Tensor exp_avg, exp_avg_sq;                 // uint8 codes or float32 values
    at::Tensor exp_avg_absmax, exp_avg_sq_absmax;   // undefined for float32 state
    double weight_decay = 0.0;
    [[nodiscard]] bool quantized() const { return exp_avg_absmax.defined(); }
  };
  void update_on_cuda(Slot& slot, const at::Tensor& grad, double lr);
  std::vector<Slot> slots_;
  AdamW8bitOptions options_;
  at::Tensor cuda_maps_;  // the quantization maps on the parameters' GPU (adamw_8bit_cuda.hpp), made once
};

}  // namespace hpctrain::optim
