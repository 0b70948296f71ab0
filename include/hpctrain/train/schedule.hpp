// Learning-rate schedules with Hugging Face's semantics (transformers.get_scheduler), as pure functions.
#pragma once

#include <cstdint>
#include <string>

namespace hpctrain::train {

enum class ScheduleKind { linear, cosine, constant };

ScheduleKind parse_schedule(const std::string& name);  // "linear" | "cosine" | "constant"; else Error
std::string to_string(ScheduleKind kind);

struct LrSchedule {
  ScheduleKind kind = ScheduleKind::linear;
  double base_lr = 5e-5;
  int64_t warmup_steps = 0;  // optimizer steps of linear warm-up from 0 to base_lr
  int64_t total_steps = 1;   // optimizer steps of the whole run
};

// Warm-up steps from a ratio of the total (HF: ceil(ratio * total)).
int64_t warmup_steps_from_ratio(double ratio, int64_t total_steps);

// The learning rate used for optimizer step `step` (0-based, before the step is taken):
//   warm-up: base_lr * step / warmup_steps
//   linear:  base_lr * (total - step) / (total - warmup), floored at 0
//   cosine:  base_lr * 0.5 * (1 + cos(pi * progress)), progress = (step - warmup) / (total - warmup)
//   constant: base_lr after warm-up
double learning_rate(const LrSchedule& schedule, int64_t step);

}  // namespace hpctrain::train
