// AdamW ("adamw_torch") with PyTorch's update rule (torch.optim.AdamW, decoupled weight decay) and Hugging
// Face Trainer's defaults (betas 0.9/0.999, eps 1e-8, no weight decay on biases and normalisation weights).
// One implementation of optim::Optimizer (optimizer.hpp).
#pragma once

#include <ATen/ATen.h>

#include <string>
#include <vector>

#include "hpctrain/optim/optimizer.hpp"

namespace hpctrain::optim {

struct AdamWOptions {
  double lr = 5e-5;  // overwritten every step by the schedule
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  double weight_decay = 0.0;  // for the (named_parameters, no_decay, options) constructor's weight_decay_groups
  // One pass over memory per parameter on CPU float32/float64 (Note [Fused AdamW]); false: the tensor
  // operations torch.optim.AdamW runs (same formula, rounding may differ in the last bit). Off the CPU, true
  // updates lists of parameters at once: torch's fused CUDA kernel (LibTorch 2.x) or the multi-tensor operations
  // (Note [AdamW off the CPU] in src/optim/adamw.cpp); false: per-tensor operations there too.
  bool fused = true;
};

class AdamW final : public Optimizer {
 public:
  // Over weight_decay_groups(named_parameters, options.weight_decay, no_decay) (no_decay: the model's
  // models::no_weight_decay_parameters).
  AdamW(const NamedParameters& named_parameters, const std::set<std::string>& no_decay, AdamWOptions options);
  // Over explicit groups (options.weight_decay unused: each group's applies).
  AdamW(std::vector<ParameterGroup> groups, AdamWOptions options);

  [[nodiscard]] std::string type() const override { return "adamw_torch"; }
  [[nodiscard]] nlohmann::json hyperparameters() const override;
  [[nodiscard]] const AdamWOptions& options() const { return options_; }

 private:
  // State: "exp_avg.<name>", "exp_avg_sq.<name>" (the base adds "step").
  void update(double lr) override;
  [[nodiscard]] OptimizerState state_tensors() const override;
  [[nodiscard]] std::set<std::string> non_negative_state() const override { return {"exp_avg_sq"}; }

  struct Slot {
    at::Tensor param, exp_avg, exp_avg_sq;
    std::string name;
    double weight_decay = 0.0;
  };
  std::vector<Slot> slots_;
  AdamWOptions options_;
};

}  // namespace hpctrain::optim
