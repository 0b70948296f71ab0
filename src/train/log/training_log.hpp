// Private to src/train: what rank 0 reports while training — OUTPUT/metrics.jsonl, a progress bar on a
// terminal (plain lines otherwise), TensorBoard events, and the Hugging Face log_history entries of trainer_state.json.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "hpctrain/train/eval_metrics.hpp"
#include "hpctrain/train/peak_flops.hpp"
#include "hpctrain/train/train_options.hpp"

namespace hpctrain::train {

// Wall time of one optimizer step by phase, seconds (this rank's; rank 0 reports its own).
struct StepTimes {
  double data_wait = 0;              // waiting for the loader's next batch
  double forward = 0;                // forward, loss and the per-micro-batch loss allreduce
  double backward = 0;               // autograd backward (bucket allreduces overlap it)
  double exposed_communication = 0;  // gradient reduction left after backward (reducer finalize)
  double optimizer = 0;              // clipping, AdamW step, zero_grad
  double total = 0;
};

struct StepRecord {
  int64_t step = 0;        // 1-based, after the step
  double epoch = 0;        // fractional, as Hugging Face
  double loss = 0;         // mean cross-entropy over the step's global batch
  double lr = 0;           // learning rate used by this step
  double grad_norm = 0;    // global gradient norm before clipping
  int64_t samples = 0;     // examples in the global batch (padding duplicates excluded)
  StepTimes times;
  bool skipped = false;    // no optimizer step (non-finite loss, or gradients overflowed under loss scaling)
  std::optional<double> loss_scale;  // after this step's update, with loss scaling
  int64_t comm_bytes = 0;  // bytes this rank passed to collectives during the step (Comm::bytes_sent)
  int64_t tokens = 0;      // input tokens (not padding) of the global batch's trained rows; 0 for images
  double flops = 0;        // the model's training FLOPs for them (Note [Model FLOPs]); 0 when unknown
  // The largest optimizer state one rank holds, bytes (Note [Optimizer state bytes]); set on logged steps.
  std::optional<int64_t> optimizer_state_bytes{};
  // Bytes of this rank's model parameters and buffers (a 4-bit base at its packed size, models::model_bytes); set
  // on logged steps.
  std::optional<int64_t> model_bytes{};
  // The largest parameters + gradients + optimizer state one rank holds, bytes; set on logged steps.
  std::optional<int64_t> model_state_bytes{};
};

// An evaluation's Hugging Face log_history entry, as metrics.jsonl writes it too: {"epoch", "eval_loss",
// "eval_<score>"..., "eval_examples", "step"}.
[[nodiscard]] nlohmann::json eval_entry(int64_t step, double epoch, const EvalMetrics& metrics);

class LogSink;
struct StepWindow;

// Rank 0 reports through sinks (log_sink.hpp): metrics.jsonl, the terminal and, with --report-to
// tensorboard, OUTPUT/runs/events.out.tfevents.*. Other ranks report nothing.
class TrainingLog {
 public:
  // Only `active` (rank 0) writes. Lines of an existing metrics.jsonl with step > start_step (from an
  // interrupted run after its last checkpoint) are dropped, so the file reads as one run. Uses the options'
  // output, logging_steps, progress and report_to.
  TrainingLog(const TrainOptions& options, bool active, int64_t start_step, int64_t total_steps);
  ~TrainingLog();

  // Whether step `step` (1-based) is logged: every logging_steps, the last, and every skipped step. A pure
  // function of the step, the options and the (agreed) skip: the same on every rank, active or not.
  [[nodiscard]] bool logs_step(int64_t step, bool skipped) const;
  // Returns the log_history entry when this step is logged (logs_step), else null.
  nlohmann::json add_step(const StepRecord& record);
  // Logs an evaluation; returns its log_history entry.
  nlohmann::json add_eval(int64_t step, double epoch, const EvalMetrics& metrics);
  // The global batch's peak FLOP/s (every rank's peak, summed; `measured`: measure_peak_flops's, else
  // --peak-tflops): with it, logged steps carry MFU, never above 1 (Note [MFU never above 100 %]).
  void set_peak_flops(double flops_per_second, bool measured) { mfu_peak_.emplace(flops_per_second, measured); }
  // A line for the terminal that does not collide with the progress bar.
  void info(const std::string& line);
  void finish();

 private:
  int64_t logging_steps_, total_steps_;
  std::vector<std::unique_ptr<LogSink>> sinks_;  // empty unless active
  std::unique_ptr<StepWindow> window_;           // the steps since the last logged one
  std::optional<MfuPeak> mfu_peak_;
};

}  // namespace hpctrain::train
