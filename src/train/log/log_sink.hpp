// Private to src/train: one destination of what TrainingLog reports (metrics.jsonl, the terminal, TensorBoard).
// Each sink lives in its own file (jsonl_sink.cpp, console_sink.cpp, tensorboard_sink.cpp): a new one is a new file.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "hpctrain/train/eval_metrics.hpp"
#include "training_log.hpp"

namespace hpctrain::train {

// The steps since the previous logged step, summed (StepTimes: seconds over `steps` steps).
struct StepWindow {
  StepTimes times;
  int64_t steps = 0, samples = 0, comm_bytes = 0, tokens = 0;
  double flops = 0;
  double samples_per_second = 0;  // of the newest logged window (kept between logged steps, for the bar)
  double tokens_per_second = 0;   // likewise; 0 without tokens (image models)
  std::optional<double> mfu;      // model FLOPs / (time x peak), Note [Model FLOPs]; likewise; none when unknown
  bool mfu_peak_raised = false;   // Note [MFU never above 100 %]: this window raised the measured peak
  bool mfu_clamped = false;       // this window ran above --peak-tflops: mfu shown as 1
};

class LogSink {
 public:
  virtual ~LogSink() = default;
  // Every step; `logged` on the steps metrics.jsonl records (every logging_steps, the last, every skip).
  virtual void on_step(const StepRecord& record, const StepWindow& window, bool logged) = 0;
  virtual void on_eval(int64_t step, double epoch, const EvalMetrics& metrics) = 0;
  // A line for the terminal (only the console sink prints it).
  virtual void info(const std::string& /*line*/) {}
  virtual void finish() {}
};

}  // namespace hpctrain::train
