// The TensorBoard sink (sinks.hpp): OUTPUT/runs/events.out.tfevents.*, the values of metrics.jsonl's lines at
// the same steps under Hugging Face's tags (train/loss, eval/accuracy, ...), one flushed record per line.
#include <optional>

#include "hpctrain/io/tfevents.hpp"
#include "hpctrain/train/run_folder.hpp"
#include "sinks.hpp"

namespace hpctrain::train {
namespace {

class TensorBoardSink final : public LogSink {
 public:
  TensorBoardSink(const std::filesystem::path& output, int64_t start_step) : events_(output / kTensorBoardName) {
    // As metrics.jsonl is truncated after start_step: TensorBoard drops earlier files' values from start_step + 1
    // on (a resumed run recomputes them; a fresh run, start_step 0, replaces them all).
    events_.add_session_start(start_step + 1);
  }

  void on_step(const StepRecord& r, const StepWindow& w, bool logged) override {
    if (!logged) return;
    std::vector<io::Scalar> scalars = {{"train/loss", r.loss}, {"train/learning_rate", r.lr},
                                       {"train/grad_norm", r.grad_norm}, {"train/samples_per_second", w.samples_per_second},
                                       {"train/epoch", r.epoch}};
    if (r.loss_scale) scalars.emplace_back("train/loss_scale", *r.loss_scale);
    if (w.tokens > 0) scalars.emplace_back("train/tokens_per_second", w.tokens_per_second);
    if (w.mfu) scalars.emplace_back("train/mfu", *w.mfu);
    if (r.optimizer_state_bytes)
      scalars.emplace_back("train/optimizer_state_bytes", static_cast<double>(*r.optimizer_state_bytes));
    events_.add_scalars(r.step, scalars);
  }

  void on_eval(int64_t step, double epoch, const EvalMetrics& m) override {
    std::vector<std::pair<std::string, double>> scalars{{"eval/loss", m.loss}};
    for (const Score& score : m.scores) scalars.emplace_back("eval/" + score.key, score.value);
    scalars.emplace_back("eval/epoch", epoch);
    events_.add_scalars(step, scalars);
  }

 private:
  io::EventFileWriter events_;
};

}  // namespace

std::unique_ptr<LogSink> make_tensorboard_sink(const std::filesystem::path& output, int64_t start_step) {
  return std::make_unique<TensorBoardSink>(output, start_step);
}

}  // namespace hpctrain::train
