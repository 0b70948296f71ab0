// AdamW with PyTorch's update rule (torch.optim.AdamW, decoupled weight decay) and Hugging Face
// Trainer's defaults (betas 0.9/0.999, eps 1e-8, no weight decay on biases and LayerNorm weights).
// State is kept by parameter name so checkpoints (optimizer.safetensors) survive any number of ranks.
#pragma once

#include <ATen/ATen.h>

#include <map>
#include <string>
#include <vector>

namespace hpctrain::train {

struct AdamWOptions {
  double lr = 5e-5;  // overwritten every step by the schedule
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  double weight_decay = 0.0;
  // One pass over memory per parameter on CPU float32/float64 (Note [Fused AdamW]); false: the tensor
  // operations torch.optim.AdamW runs (same formula, rounding may differ in the last bit).
  bool fused = true;
};

// True for the parameters Hugging Face's Trainer excludes from weight decay: biases and LayerNorm weights.
bool excluded_from_weight_decay(const std::string& name);

class AdamW {
 public:
  AdamW(std::vector<std::pair<std::string, at::Tensor>> named_parameters, AdamWOptions options);

  // One update with learning rate `lr` from the parameters' current .grad (a parameter without a
  // gradient is left untouched, as torch does).
  void step(double lr);
  void zero_grad();

  int64_t steps() const { return step_; }
  const AdamWOptions& options() const { return options_; }

  // "exp_avg.<name>", "exp_avg_sq.<name>" and "step" (int64 scalar).
  std::map<std::string, at::Tensor> state_dict() const;
  // Strict: every state tensor present with its parameter's shape; Error naming what is missing or wrong.
  void load_state_dict(const std::map<std::string, at::Tensor>& state);

 private:
  struct Slot {
    std::string name;
    at::Tensor param, exp_avg, exp_avg_sq;
    bool decay = true;
  };
  std::vector<Slot> slots_;
  AdamWOptions options_;
  int64_t step_ = 0;
};

}  // namespace hpctrain::train
