// TrainingLog (training_log.hpp): metrics.jsonl, the progress bar and plain progress lines.
#include "training_log.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <sstream>

#include "hpctrain/core/error.hpp"
#include "hpctrain/core/log.hpp"
#include "hpctrain/core/progress.hpp"
#include "hpctrain/io/atomic_write.hpp"
#include "hpctrain/train/checkpoint.hpp"

namespace hpctrain::train {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr const char* kMetricsName = "metrics.jsonl";

// Keeps the lines of `path` whose "step" is at most `last_step` (written atomically: tmp, fsync, rename).
void truncate_after(const fs::path& path, int64_t last_step) {
  if (!fs::is_regular_file(path)) return;
  std::istringstream lines(read_text(path));
  std::string kept;
  for (std::string line; std::getline(lines, line);) {
    const auto entry = nlohmann::json::parse(line, nullptr, false);
    if (entry.is_object() && entry.value("step", int64_t{0}) <= last_step) kept += line + "\n";
  }
  io::write_file_atomically(path, kept);
}

nlohmann::json times_json(const StepTimes& t, double steps) {
  const double n = std::max(1.0, steps);
  return {{"data_wait", t.data_wait / n}, {"forward", t.forward / n}, {"backward", t.backward / n},
          {"exposed_communication", t.exposed_communication / n}, {"optimizer", t.optimizer / n}, {"step", t.total / n}};
}

void add_times(StepTimes& into, const StepTimes& t) {
  into.data_wait += t.data_wait, into.forward += t.forward, into.backward += t.backward;
  into.exposed_communication += t.exposed_communication, into.optimizer += t.optimizer, into.total += t.total;
}

}  // namespace

TrainingLog::TrainingLog(const fs::path& output, bool active, bool progress, int64_t logging_steps, int64_t start_step,
                         int64_t total_steps)
    : active_(active), tty_(isatty(fileno(stderr)) != 0), progress_(progress), logging_steps_(logging_steps),
      start_step_(start_step), total_steps_(total_steps), start_(Clock::now()), last_draw_(start_) {
  if (!active_) return;
  fs::create_directories(output);
  truncate_after(output / kMetricsName, start_step);
  metrics_.open(output / kMetricsName, std::ios::app);
  HPCTRAIN_CHECK(metrics_.good(), "cannot open '{}' for appending", (output / kMetricsName).string());
}

TrainingLog::~TrainingLog() {
  if (bar_drawn_) std::fputc('\n', stderr);
}

nlohmann::json TrainingLog::add_step(const StepRecord& r) {
  if (!active_) return nullptr;
  add_times(window_times_, r.times);
  ++window_steps_;
  window_samples_ += r.samples;
  window_comm_bytes_ += r.comm_bytes;
  const bool logged = r.step % logging_steps_ == 0 || r.step == total_steps_ || r.skipped;  // every skip has a line
  if (logged && window_times_.total > 0) last_samples_per_second_ = static_cast<double>(window_samples_) / window_times_.total;
  draw_progress(r, last_samples_per_second_, logged);
  if (!logged) return nullptr;
  nlohmann::json line = {{"step", r.step}, {"epoch", r.epoch}, {"loss", r.loss}, {"lr", r.lr}, {"grad_norm", r.grad_norm},
                         {"samples", window_samples_}, {"samples_per_second", last_samples_per_second_},
                         {"time", times_json(window_times_, static_cast<double>(window_steps_))},
                         {"comm_bytes", window_comm_bytes_}};
  if (r.skipped) line["skipped"] = true;
  if (r.loss_scale) line["loss_scale"] = *r.loss_scale;
  write_json_line(line);
  window_times_ = StepTimes{};
  window_steps_ = window_samples_ = window_comm_bytes_ = 0;
  return {{"epoch", r.epoch}, {"grad_norm", r.grad_norm}, {"learning_rate", r.lr}, {"loss", r.loss}, {"step", r.step}};
}

nlohmann::json TrainingLog::add_eval(int64_t step, double epoch, const ClassificationMetrics& m) {
  const nlohmann::json entry = {{"epoch", epoch}, {"eval_loss", m.loss}, {"eval_accuracy", m.accuracy},
                                {"eval_macro_f1", m.macro_f1}, {"eval_examples", m.examples}, {"step", step}};
  if (!active_) return entry;
  write_json_line(entry);
  info(fmt::format("eval at step {} (epoch {:.2f}): loss {:.4f}, accuracy {:.4f}, macro-F1 {:.4f} over {} examples", step,
                   epoch, m.loss, m.accuracy, m.macro_f1, m.examples));
  return entry;
}

void TrainingLog::info(const std::string& line) {
  if (!active_) return;
  if (bar_drawn_) std::fputs("\r\033[K", stderr);
  bar_drawn_ = false;
  log::write_info(line);
}

void TrainingLog::finish() {
  if (bar_drawn_) std::fputc('\n', stderr);
  bar_drawn_ = false;
  if (metrics_.is_open()) metrics_.flush();
}

void TrainingLog::write_json_line(const nlohmann::json& line) {
  metrics_ << line.dump() << "\n";
  metrics_.flush();
}

void TrainingLog::draw_progress(const StepRecord& r, double samples_per_second, bool force) {
  const auto now = Clock::now();
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  const int64_t done = r.step - start_step_;
  const double eta = done > 0 ? elapsed / static_cast<double>(done) * static_cast<double>(total_steps_ - r.step) : NAN;
  const std::string text = fmt::format("step {}/{} | epoch {:.2f} | loss {:.4f} | lr {:.2e} | {:.1f} samples/s | ETA {}",
                                       r.step, total_steps_, r.epoch, r.loss, r.lr, samples_per_second,
                                       format_duration(eta));
  if (!tty_ || !progress_) {
    if (force) log::write_info(text);
    return;
  }
  if (!force && now - last_draw_ < std::chrono::milliseconds(100)) return;
  last_draw_ = now;
  const int width = 24;
  const auto filled = static_cast<int>(width * static_cast<double>(r.step) / static_cast<double>(std::max<int64_t>(1, total_steps_)));
  std::fprintf(stderr, "\r\033[Ktrain [%s%s] %s", std::string(static_cast<size_t>(filled), '#').c_str(),
               std::string(static_cast<size_t>(width - filled), '.').c_str(), text.c_str());
  std::fflush(stderr);
  bar_drawn_ = true;
}

}  // namespace hpctrain::train
