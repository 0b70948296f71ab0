// Private to src/train: --timeline FILE.json, a Chrome trace (Trace Event Format) of every rank's spans.
//
// Note [Timeline clocks]: each rank measures its steady clock's offset to rank 0's at start
// (dist::measure_clock_offset) and shifts its events by it, so the trace has one time axis: rank 0's clock,
// 0 at the timeline's start. Each process is a rank (pid = rank, named "rank N"); its threads are named
// main, communication and loader. Timestamps and durations are microseconds ("X" complete events).
#pragma once

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <filesystem>

#include "hpctrain/core/span.hpp"
#include "hpctrain/dist/comm.hpp"

namespace hpctrain::train {

// Spans kept per rank; later ones are counted, not kept, and the file's otherData says so.
inline constexpr std::size_t kTimelineMaxEvents = 200000;

// One rank's part of the trace: its process and thread names and its complete events, shifted by
// `shift_ns` (offset to rank 0 minus the timeline's origin on rank 0's clock).
[[nodiscard]] nlohmann::json rank_trace_events(int rank, const span::Recording& recording, int64_t shift_ns);

class Timeline {
 public:
  // Collective when `file` is not empty (the option is agreed): starts the recording, measures this rank's
  // clock offset and agrees on the origin. An empty `file`: does nothing, now or in write().
  Timeline(dist::Comm& comm, std::filesystem::path file);
  ~Timeline();
  Timeline(const Timeline&) = delete;
  Timeline& operator=(const Timeline&) = delete;

  // Collective: stops the recording; rank 0 gathers every rank's events and writes the file atomically.
  void write();

 private:
  [[nodiscard]] nlohmann::json gather(const span::Recording& recording) const;

  dist::Comm& comm_;
  std::filesystem::path file_;
  int64_t offset_ns_ = 0;  // rank 0's clock minus this rank's
  int64_t origin_ns_ = 0;  // the start, on rank 0's clock
};

}  // namespace hpctrain::train
