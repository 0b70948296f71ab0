#include "hpctrain/core/progress.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>

namespace hpctrain {

std::string format_bytes(double bytes) {
  const char* units[] = {"B", "KB", "MB", "GB", "TB"};
  int u = 0;
  while (bytes >= 1000.0 && u < 4) {
    bytes /= 1000.0;
    ++u;
  }
  return u == 0 ? fmt::format("{:.0f} {}", bytes, units[u]) : fmt::format("{:.1f} {}", bytes, units[u]);
}

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const auto s = static_cast<int64_t>(std::llround(seconds));
  if (s >= 3600) return fmt::format("{}h{:02}m", s / 3600, (s % 3600) / 60);
  if (s >= 60) return fmt::format("{}m{:02}s", s / 60, s % 60);
  return fmt::format("{}s", s);
}

ProgressBar::ProgressBar(std::string label, int64_t total_units, std::string unit, bool enabled)
    : label_(std::move(label)), unit_(std::move(unit)), total_units_(total_units), enabled_(enabled) {
  tty_ = isatty(fileno(stderr)) != 0;
  start_ = last_draw_ = std::chrono::steady_clock::now();
}

ProgressBar::~ProgressBar() {
  if (!finished_ && tty_ && enabled_) std::fputc('\n', stderr);
}

void ProgressBar::update(int64_t units_done, int64_t bytes_done, int64_t total_bytes) {
  units_ = units_done;
  bytes_ = bytes_done;
  total_bytes_ = total_bytes;
  const auto now = std::chrono::steady_clock::now();
  if (!tty_ || !enabled_ || now - last_draw_ < std::chrono::milliseconds(100)) return;
  last_draw_ = now;
  draw(false);
}

void ProgressBar::finish() {
  if (finished_ || !enabled_) return;
  finished_ = true;
  draw(true);
}

void ProgressBar::draw(bool final_line) {
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  // The fraction done comes from bytes when known (reading), else from units.
  double fraction = -1;
  if (total_bytes_ > 0 && bytes_ >= 0) fraction = static_cast<double>(bytes_) / static_cast<double>(total_bytes_);
  else if (total_units_ > 0) fraction = static_cast<double>(units_) / static_cast<double>(total_units_);
  std::string bar;
  if (fraction >= 0) {
    const int width = 24, filled = static_cast<int>(std::lround(std::min(1.0, fraction) * width));
    bar = fmt::format("[{}{}] {:3.0f}% ", std::string(filled, '#'), std::string(width - filled, '.'), fraction * 100);
  }
  std::string line = fmt::format("{}: {}{} {}", label_, bar, units_, unit_);
  if (bytes_ >= 0) line += fmt::format(", {}", format_bytes(static_cast<double>(bytes_)));
  if (elapsed > 0) {
    line += fmt::format(", {:.0f} {}/s", units_ / elapsed, unit_);
    if (bytes_ >= 0) line += fmt::format(", {}/s", format_bytes(bytes_ / elapsed));
  }
  if (final_line) line += fmt::format(", {}", format_duration(elapsed));
  else if (fraction > 0) line += fmt::format(", ETA {}", format_duration(elapsed * (1 - fraction) / fraction));
  if (tty_) std::fprintf(stderr, "\r\033[K%s%s", line.c_str(), final_line ? "\n" : "");
  else if (final_line) std::fprintf(stderr, "%s\n", line.c_str());
  std::fflush(stderr);
}

}  // namespace hpctrain
