// TrainingLog (training_log.hpp): the logged-step decision and window, handed to the sinks (sinks.hpp).
#include "training_log.hpp"

#include "console_sink.hpp"
#include "sinks.hpp"

namespace hpctrain::train {
namespace {

void add_times(StepTimes& into, const StepTimes& t) {
  into.data_wait += t.data_wait, into.forward += t.forward, into.backward += t.backward;
  into.exposed_communication += t.exposed_communication, into.optimizer += t.optimizer, into.total += t.total;
}

}  // namespace

nlohmann::json eval_entry(int64_t step, double epoch, const EvalMetrics& m) {
  nlohmann::json entry = {{"epoch", epoch}, {"eval_loss", m.loss}, {"eval_examples", m.examples}, {"step", step}};
  for (const Score& score : m.scores) entry["eval_" + score.key] = score.value;
  return entry;
}

TrainingLog::TrainingLog(const TrainOptions& options, bool active, int64_t start_step, int64_t total_steps)
    : logging_steps_(options.logging_steps), total_steps_(total_steps), window_(std::make_unique<StepWindow>()) {
  if (!active) return;
  sinks_.push_back(make_jsonl_sink(options.output, start_step));
  sinks_.push_back(make_console_sink(show_progress_bar(options.progress, terminal_facts()), start_step, total_steps));
  if (options.report_to == "tensorboard") sinks_.push_back(make_tensorboard_sink(options.output, start_step));
}

TrainingLog::~TrainingLog() = default;

bool TrainingLog::logs_step(int64_t step, bool skipped) const {
  return step % logging_steps_ == 0 || step == total_steps_ || skipped;  // every skip has a line
}

nlohmann::json TrainingLog::add_step(const StepRecord& r) {
  if (sinks_.empty()) return nullptr;
  StepWindow& w = *window_;
  add_times(w.times, r.times);
  ++w.steps;
  w.samples += r.samples;
  w.comm_bytes += r.comm_bytes;
  w.tokens += r.tokens;
  w.flops += r.flops;
  const bool logged = logs_step(r.step, r.skipped);
  if (logged && w.times.total > 0) {
    w.samples_per_second = static_cast<double>(w.samples) / w.times.total;
    w.tokens_per_second = static_cast<double>(w.tokens) / w.times.total;
    if (mfu_peak_ && w.flops > 0) {
      const MfuPeak::Reading reading = mfu_peak_->read(w.flops / w.times.total);
      w.mfu = reading.mfu, w.mfu_peak_raised = reading.peak_raised, w.mfu_clamped = reading.clamped;
      if (!reading.note.empty()) info(reading.note);
    }
  }
  for (auto& sink : sinks_) sink->on_step(r, w, logged);
  if (!logged) return nullptr;
  StepWindow next;
  next.samples_per_second = w.samples_per_second, next.tokens_per_second = w.tokens_per_second, next.mfu = w.mfu;
  w = next;
  return {{"epoch", r.epoch}, {"grad_norm", r.grad_norm}, {"learning_rate", r.lr}, {"loss", r.loss}, {"step", r.step}};
}

nlohmann::json TrainingLog::add_eval(int64_t step, double epoch, const EvalMetrics& m) {
  for (auto& sink : sinks_) sink->on_eval(step, epoch, m);
  return eval_entry(step, epoch, m);
}

void TrainingLog::info(const std::string& line) {
  for (auto& sink : sinks_) sink->info(line);
}

void TrainingLog::finish() {
  for (auto& sink : sinks_) sink->finish();
}

}  // namespace hpctrain::train
