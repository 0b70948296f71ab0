// The progress of `eval` and `predict` over a split, shown as `train` shows its steps (Note [Progress bar under
// mpirun] in src/train/log/console_sink.hpp): rank 0 draws a bar on a terminal, else prints a plain line at every
// tenth of a long split; on stderr, so that stdout keeps only the command's result (`eval --json`).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace hpctrain::train {

class SplitProgress {
 public:
  // what: "eval" or "predict"; total_batches: the epoch's batches (every rank's count); active: rank 0;
  // enabled: not --no-progress. A split of fewer than kLongSplitBatches gets no plain lines (only a bar).
  SplitProgress(std::string what, int64_t total_batches, bool active, bool enabled);
  ~SplitProgress();
  SplitProgress(const SplitProgress&) = delete;
  SplitProgress& operator=(const SplitProgress&) = delete;

  static constexpr int64_t kLongSplitBatches = 10;
  // After each batch: `done` of total_batches.
  void update(int64_t done);

 private:
  std::string what_;
  int64_t total_, printed_tenths_ = 0;
  bool active_, bar_ = false, drawn_ = false;
  std::chrono::steady_clock::time_point start_, last_draw_;
};

}  // namespace hpctrain::train
