// The metrics.jsonl sink (sinks.hpp): one JSON object per logged step and per evaluation, flushed at once.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "hpctrain/core/error.hpp"
#include "hpctrain/io/atomic_write.hpp"
#include "hpctrain/train/checkpoint.hpp"
#include "hpctrain/train/run_folder.hpp"
#include "sinks.hpp"

namespace hpctrain::train {
namespace {

namespace fs = std::filesystem;

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

class JsonlSink final : public LogSink {
 public:
  JsonlSink(const fs::path& output, int64_t start_step) {
    fs::create_directories(output);
    truncate_after(output / kMetricsName, start_step);
    file_.open(output / kMetricsName, std::ios::app);
    HPCTRAIN_CHECK(file_.good(), "cannot open '{}' for appending", (output / kMetricsName).string());
  }

  void on_step(const StepRecord& r, const StepWindow& w, bool logged) override {
    if (!logged) return;
    nlohmann::json line = {{"step", r.step}, {"epoch", r.epoch}, {"loss", r.loss}, {"lr", r.lr}, {"grad_norm", r.grad_norm},
                           {"samples", w.samples}, {"samples_per_second", w.samples_per_second},
                           {"time", times_json(w.times, static_cast<double>(w.steps))}, {"comm_bytes", w.comm_bytes}};
    if (w.tokens > 0) line["tokens"] = w.tokens, line["tokens_per_second"] = w.tokens_per_second;
    if (w.mfu) line["mfu"] = *w.mfu;
    if (w.mfu_peak_raised) line["mfu_peak_raised"] = true;  // Note [MFU never above 100 %]
    if (w.mfu_clamped) line["mfu_clamped"] = true;
    if (r.optimizer_state_bytes) line["optimizer_state_bytes"] = *r.optimizer_state_bytes;
    if (r.model_bytes) line["model_bytes"] = *r.model_bytes;
    if (r.model_state_bytes) line["model_state_bytes"] = *r.model_state_bytes;
    if (r.skipped) line["skipped"] = true;
    if (r.loss_scale) line["loss_scale"] = *r.loss_scale;
    write(line);
  }

  void on_eval(int64_t step, double epoch, const EvalMetrics& m) override { write(eval_entry(step, epoch, m)); }

  void finish() override { file_.flush(); }

 private:
  void write(const nlohmann::json& line) {
    file_ << line.dump() << "\n";
    file_.flush();
  }
  std::ofstream file_;
};

}  // namespace

std::unique_ptr<LogSink> make_jsonl_sink(const fs::path& output, int64_t start_step) {
  return std::make_unique<JsonlSink>(output, start_step);
}

}  // namespace hpctrain::train
