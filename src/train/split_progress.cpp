// SplitProgress (split_progress.hpp): a bar or plain lines on stderr for eval and predict.
#include "hpctrain/train/split_progress.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "hpctrain/core/progress.hpp"
#include "log/console_sink.hpp"

namespace hpctrain::train {
namespace {

using Clock = std::chrono::steady_clock;

// As show_progress_bar for stdout, for stderr: this process's, or under mpirun the launcher's.
bool stderr_shows_a_bar(bool enabled) {
  if (!enabled || isatty(fileno(stderr)) == 0) return false;
  if (std::getenv("OMPI_COMM_WORLD_SIZE") == nullptr) return true;
  std::error_code error;
  const auto target = std::filesystem::read_symlink(fmt::format("/proc/{}/fd/2", getppid()), error);
  return !error && names_terminal(target.string());
}

}  // namespace

SplitProgress::SplitProgress(std::string what, int64_t total_batches, bool active, bool enabled)
    : what_(std::move(what)), total_(total_batches), active_(active && enabled), start_(Clock::now()) {
  bar_ = active_ && stderr_shows_a_bar(enabled);
}

SplitProgress::~SplitProgress() {
  if (!drawn_) return;
  std::fputc('\n', stderr);
  std::fflush(stderr);
}

void SplitProgress::update(int64_t done) {
  if (!active_ || total_ <= 0) return;
  const auto now = Clock::now();
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  const double eta = done > 0 ? elapsed / static_cast<double>(done) * static_cast<double>(total_ - done) : NAN;
  const std::string text = fmt::format("batch {}/{} | {:.2f} batches/s | ETA {}", done, total_,
                                       elapsed > 0 ? static_cast<double>(done) / elapsed : 0.0, format_duration(eta));
  if (bar_) {
    if (done < total_ && now - last_draw_ < std::chrono::milliseconds(100)) return;
    last_draw_ = now;
    const int width = 24;
    const auto filled = static_cast<int>(width * static_cast<double>(done) / static_cast<double>(total_));
    std::fprintf(stderr, "\r\033[K%s [%s%s] %s", what_.c_str(), std::string(static_cast<size_t>(filled), '#').c_str(),
                 std::string(static_cast<size_t>(width - filled), '.').c_str(), text.c_str());
    std::fflush(stderr);
    drawn_ = true;
    return;
  }
  if (total_ < kLongSplitBatches) return;
  const int64_t tenths = done * 10 / total_;
  if (tenths <= printed_tenths_) return;
  printed_tenths_ = tenths;
  std::fprintf(stderr, "%s: %s\n", what_.c_str(), text.c_str());
  std::fflush(stderr);
}

}  // namespace hpctrain::train
