// The terminal sink (sinks.hpp): a progress bar redrawn at most 10 times a second, or a plain line per logged
// step; info lines never collide with the bar. The bar-or-lines decision: Note [Progress bar under mpirun].
#include "console_sink.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "hpctrain/core/log.hpp"
#include "hpctrain/core/progress.hpp"
#include "sinks.hpp"

namespace hpctrain::train {
namespace {

using Clock = std::chrono::steady_clock;

class ConsoleSink final : public LogSink {
 public:
  ConsoleSink(bool bar, int64_t start_step, int64_t total_steps)
      : bar_(bar), start_step_(start_step), total_steps_(total_steps), start_(Clock::now()), last_draw_(start_) {}
  ~ConsoleSink() override { end_bar(); }

  void on_step(const StepRecord& r, const StepWindow& w, bool logged) override {
    const std::string text = status(r, w);
    if (!bar_) {
      if (logged) log::write_info(text);
      return;
    }
    const auto now = Clock::now();
    if (!logged && now - last_draw_ < std::chrono::milliseconds(100)) return;
    last_draw_ = now;
    draw(r.step, text);
  }

  void on_eval(int64_t step, double epoch, const EvalMetrics& m) override {
    std::string scores;
    for (const Score& score : m.scores) scores += fmt::format(", {} {:.4f}", score.label, score.value);
    info(fmt::format("eval at step {} (epoch {:.2f}): loss {:.4f}{} over {} examples", step, epoch, m.loss, scores,
                     m.examples));
  }

  void info(const std::string& line) override {
    if (bar_drawn_) std::fputs("\r\033[K", stdout);
    bar_drawn_ = false;
    log::write_info(line);
  }

  void finish() override { end_bar(); }

 private:
  std::string status(const StepRecord& r, const StepWindow& w) const {
    const double elapsed = std::chrono::duration<double>(Clock::now() - start_).count();
    const int64_t done = r.step - start_step_;
    const double eta = done > 0 ? elapsed / static_cast<double>(done) * static_cast<double>(total_steps_ - r.step) : NAN;
    std::string speed = fmt::format("{:.1f} samples/s", w.samples_per_second);
    if (w.tokens_per_second > 0) speed += fmt::format(" | {:.0f} tok/s", w.tokens_per_second);
    if (w.mfu) speed += fmt::format(" | MFU {:.1f}%", 100 * *w.mfu);
    return fmt::format("step {}/{} | epoch {:.2f} | loss {:.4f} | lr {:.2e} | {} | ETA {}", r.step, total_steps_, r.epoch,
                       r.loss, r.lr, speed, format_duration(eta));
  }

  void draw(int64_t step, const std::string& text) {
    const int width = 24;
    const auto filled = static_cast<int>(width * static_cast<double>(step) /
                                         static_cast<double>(std::max<int64_t>(1, total_steps_)));
    std::fprintf(stdout, "\r\033[Ktrain [%s%s] %s", std::string(static_cast<size_t>(filled), '#').c_str(),
                 std::string(static_cast<size_t>(width - filled), '.').c_str(), text.c_str());
    std::fflush(stdout);
    bar_drawn_ = true;
  }

  void end_bar() {
    if (!bar_drawn_) return;
    std::fputc('\n', stdout);
    std::fflush(stdout);
    bar_drawn_ = false;
  }

  bool bar_;
  int64_t start_step_, total_steps_;
  Clock::time_point start_, last_draw_;
  bool bar_drawn_ = false;
};

}  // namespace

bool names_terminal(const std::string& link_target) {
  return link_target.rfind("/dev/pts/", 0) == 0 || link_target.rfind("/dev/tty", 0) == 0 ||
         link_target == "/dev/console";
}

TerminalFacts terminal_facts() {
  TerminalFacts facts;
  facts.stdout_is_terminal = isatty(fileno(stdout)) != 0;
  facts.under_mpirun = std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr;
  std::error_code error;  // an unreadable link (another user's launcher, no /proc) reads as "not a terminal"
  const auto target = std::filesystem::read_symlink(fmt::format("/proc/{}/fd/1", getppid()), error);
  facts.launcher_stdout_is_terminal = !error && names_terminal(target.string());
  return facts;
}

bool show_progress_bar(bool enabled, const TerminalFacts& facts) {
  if (!enabled || !facts.stdout_is_terminal) return false;
  return !facts.under_mpirun || facts.launcher_stdout_is_terminal;
}

std::unique_ptr<LogSink> make_console_sink(bool bar, int64_t start_step, int64_t total_steps) {
  return std::make_unique<ConsoleSink>(bar, start_step, total_steps);
}

}  // namespace hpctrain::train
