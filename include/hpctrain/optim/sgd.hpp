// Sgd ("sgd"): torch.optim.SGD's update rule (momentum, dampening, Nesterov, L2 weight decay added to the
// gradient), one implementation of optim::Optimizer (optimizer.hpp). Each parameter's weight decay is its
// group's.
#pragma once

#include <ATen/core/Tensor.h>

#include <string>
#include <vector>

#include "hpctrain/optim/optimizer.hpp"

namespace hpctrain::optim {

struct SgdOptions {
  double momentum = 0.0;
  double dampening = 0.0;
  bool nesterov = false;  // needs momentum > 0 and dampening 0 (Error otherwise, as torch)
};

class Sgd final : public Optimizer {
 public:
  Sgd(std::vector<ParameterGroup> groups, SgdOptions options);

  [[nodiscard]] std::string type() const override { return "sgd"; }
  [[nodiscard]] nlohmann::json hyperparameters() const override;

 private:
  // With momentum: "momentum_buffer.<name>" and "step.<name>" (updates of that parameter so far: torch
  // starts a buffer as a copy of the first gradient, without dampening). Without momentum: no state.
  void update(double lr) override;
  [[nodiscard]] OptimizerState state_tensors() const override;
  void state_loaded() override;

  struct Slot {
    at::Tensor param, buffer, steps;  // steps: int64 scalar, on the parameter's device
    int64_t host_steps = 0;           // steps' value, kept on the host: update() never reads the device
    std::string name;
    double weight_decay = 0.0;
  };
  std::vector<Slot> slots_;
  SgdOptions options_;
};

}  // namespace hpctrain::optim
