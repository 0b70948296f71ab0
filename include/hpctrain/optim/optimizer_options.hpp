// OptimizerOptions: every optimizer hyper-parameter of `hpctrain train`, declared once (the CLI's
// "Optimization" flags, TrainOptions::optimizer, make_optimizer). No LibTorch: the options layer stays light.
#pragma once

#include <string>
#include <vector>

namespace hpctrain::optim {

struct OptimizerOptions {
  // Hugging Face Trainer's --optim name or an alias (optimizer_names() lists them); make_optimizer resolves it.
  std::string optim = "adamw_torch";
  double weight_decay = 0.0;  // every optimizer; never on biases and normalisation weights (weight_decay_groups)

  // ---- adamw_torch (torch.optim.AdamW) ----
  double adam_beta1 = 0.9, adam_beta2 = 0.999, adam_epsilon = 1e-8;  // Hugging Face's defaults

  // ---- sgd (torch.optim.SGD) ----
  double sgd_momentum = 0.0;
  double sgd_dampening = 0.0;
  bool sgd_nesterov = false;  // needs momentum > 0 and dampening 0, as torch

  // ---- adafactor (transformers.optimization.Adafactor; Hugging Face Trainer's --optim adafactor mapping) ----
  double adafactor_beta1 = 0.0;              // first moment's decay; 0 = no first moment (HF's beta1=None)
  bool adafactor_relative_step = false;      // the paper's step size min(1e-2, 1/sqrt(t)); --lr is not used
  bool adafactor_scale_parameter = false;    // step size times max(eps2, RMS(parameter))
  bool adafactor_warmup_init = false;        // relative step min(1e-6 t, 1/sqrt(t)); needs relative_step
  double adafactor_clip_threshold = 1.0;     // the update's RMS is clipped to this
  double adafactor_decay_rate = -0.8;        // beta2 at step t = 1 - t^decay_rate
  double adafactor_eps1 = 1e-30;             // added to the squared gradient
  double adafactor_eps2 = 1e-3;              // floor of the parameter scale

  // ---- adamw_bnb_8bit (8-bit AdamW) ----
  // adam_beta1/2 and adam_epsilon as adamw_torch; bitsandbytes' block size (256) and min_8bit_size (4,096
  // elements) are fixed, as Hugging Face Trainer fixes them (AdamW8bitOptions).
};

// The canonical names --optim accepts, each with its aliases: "adamw_torch (adamw)", ...
[[nodiscard]] std::vector<std::string> optimizer_names();
// The canonical type tag of an --optim name or alias ("adamw" -> "adamw_torch"); Error listing the names.
[[nodiscard]] std::string canonical_optimizer_name(const std::string& optim);
// Throws Error naming the flag, the value and what is allowed (only the chosen optimizer's options are
// checked, plus --weight-decay).
void validate_optimizer_options(const OptimizerOptions& options);

}  // namespace hpctrain::optim
