// A terminal progress bar: count, optional bytes, rate and ETA; redrawn at most 10 times a second.
// On a non-terminal it prints nothing until finish(), which prints one summary line.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace hpctrain {

class ProgressBar {
 public:
  // total_units: expected count (0 = unknown); unit: what is counted ("rows", "images").
  ProgressBar(std::string label, int64_t total_units, std::string unit, bool enabled = true);
  ~ProgressBar();
  // Reports absolute progress: units done and (optionally) bytes done of total_bytes.
  void update(int64_t units_done, int64_t bytes_done = -1, int64_t total_bytes = -1);
  void finish();

 private:
  void draw(bool final_line);

  std::string label_, unit_;
  int64_t total_units_ = 0, units_ = 0, bytes_ = -1, total_bytes_ = -1;
  bool tty_ = false, enabled_ = true, finished_ = false;
  std::chrono::steady_clock::time_point start_, last_draw_;
};

std::string format_bytes(double bytes);
std::string format_duration(double seconds);

}  // namespace hpctrain
