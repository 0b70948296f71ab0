// Adafactor ("adafactor"): transformers.optimization.Adafactor (Shazeer & Stern 2018) with its defaults,
// one implementation of optim::Optimizer (optimizer.hpp). Parameters with >= 2 dimensions keep a factored
// second moment (running averages of the squared gradient's row and column means over the last two
// dimensions); vectors keep it whole. No first moment unless beta1 > 0. Each parameter's weight decay is
// its group's. Half-precision parameters are updated in float32 (state in float32), as Transformers does.
#pragma once

#include <ATen/core/Tensor.h>

#include <string>
#include <vector>

#include "hpctrain/optim/optimizer.hpp"

namespace hpctrain::optim {

// Transformers' constructor defaults, except scale_parameter and relative_step, which are Hugging Face
// Trainer's for --optim adafactor (false: the trainer's --lr and schedule give the step size).
struct AdafactorOptions {
  double eps1 = 1e-30;          // added to the squared gradient
  double eps2 = 1e-3;           // floor of the parameter scale (scale_parameter)
  double clip_threshold = 1.0;  // the update's RMS is clipped to this
  double decay_rate = -0.8;     // beta2 of step t = 1 - t^decay_rate
  double beta1 = 0.0;           // first moment's decay; 0 = none (Transformers' beta1=None; same update)
  bool scale_parameter = false;  // step size times max(eps2, RMS(parameter))
  bool relative_step = false;    // step size min(1e-2, 1/sqrt(t)) instead of step()'s lr
  bool warmup_init = false;      // relative step min(1e-6 t, 1/sqrt(t)); needs relative_step
};

class Adafactor final : public Optimizer {
 public:
  Adafactor(std::vector<ParameterGroup> groups, AdafactorOptions options);

  [[nodiscard]] std::string type() const override { return "adafactor"; }
  [[nodiscard]] nlohmann::json hyperparameters() const override;

  // The step size of a parameter's t-th update (Transformers' _get_lr), `rms` its RMS before the update.
  [[nodiscard]] double step_size(double lr, int64_t t, double rms) const;

 private:
  // "step.<name>" (the parameter's updates so far), "exp_avg_sq_row.<name>" and "exp_avg_sq_col.<name>"
  // (>= 2 dimensions) or "exp_avg_sq.<name>", and "exp_avg.<name>" when beta1 > 0.
  void update(double lr) override;
  [[nodiscard]] OptimizerState state_tensors() const override;
  void state_loaded() override;
  [[nodiscard]] std::set<std::string> non_negative_state() const override {
    return {"exp_avg_sq", "exp_avg_sq_row", "exp_avg_sq_col"};
  }

  struct Slot {
    at::Tensor param, steps, row, col, exp_avg_sq, exp_avg;  // undefined when not kept; steps on the param's device
    int64_t host_steps = 0;  // steps' value, kept on the host: update() never reads the device
    std::string name;
    double weight_decay = 0.0;
  };
  void update_slot(Slot& slot, double lr);
  [[nodiscard]] double relative_step_size(double lr, int64_t t) const;  // step_size before the parameter scale
  std::vector<Slot> slots_;
  AdafactorOptions options_;
};

}  // namespace hpctrain::optim
