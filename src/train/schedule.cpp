#include "hpctrain/train/schedule.hpp"

#include <algorithm>
#include <cmath>

#include "hpctrain/core/error.hpp"

namespace hpctrain::train {

ScheduleKind parse_schedule(const std::string& name) {
  if (name == "linear") return ScheduleKind::linear;
  if (name == "cosine") return ScheduleKind::cosine;
  if (name == "constant") return ScheduleKind::constant;
  fail("unknown learning-rate schedule '{}': expected linear, cosine or constant", name);
}

std::string to_string(ScheduleKind kind) {
  switch (kind) {
    case ScheduleKind::linear: return "linear";
    case ScheduleKind::cosine: return "cosine";
    case ScheduleKind::constant: return "constant";
  }
  return "?";
}

int64_t warmup_steps_from_ratio(double ratio, int64_t total_steps) {
  HPCTRAIN_CHECK(ratio >= 0.0 && ratio <= 1.0, "--warmup-ratio must be in [0, 1], got {}", ratio);
  return static_cast<int64_t>(std::ceil(ratio * static_cast<double>(total_steps)));
}

double learning_rate(const LrSchedule& schedule, int64_t step) {
  const double warmup = static_cast<double>(schedule.warmup_steps);
  const double s = static_cast<double>(step);
  if (step < schedule.warmup_steps) return schedule.base_lr * s / std::max(1.0, warmup);
  const double decay_steps = std::max(1.0, static_cast<double>(schedule.total_steps) - warmup);
  const double progress = (s - warmup) / decay_steps;
  switch (schedule.kind) {
    case ScheduleKind::linear: return schedule.base_lr * std::max(0.0, 1.0 - progress);
    case ScheduleKind::cosine:
      return schedule.base_lr * std::max(0.0, 0.5 * (1.0 + std::cos(M_PI * std::min(1.0, progress))));
    case ScheduleKind::constant: return schedule.base_lr;
  }
  return schedule.base_lr;
}

}  // namespace hpctrain::train
