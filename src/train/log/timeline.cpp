// --timeline (timeline.hpp): the recording, the clock alignment and rank 0's Chrome trace file.
#include "timeline.hpp"

#include <fmt/format.h>

#include <set>
#include <utility>

#include "hpctrain/core/log.hpp"
#include "hpctrain/dist/clock_offset.hpp"
#include "hpctrain/dist/collective.hpp"
#include "hpctrain/io/atomic_write.hpp"

namespace hpctrain::train {
namespace {

constexpr int kClockRounds = 8;  // ping-pongs per rank; the shortest round trip is used

nlohmann::json metadata(const char* what, int pid, uint32_t tid, const std::string& name) {
  return {{"ph", "M"}, {"name", what}, {"pid", pid}, {"tid", tid}, {"args", {{"name", name}}}};
}

nlohmann::json complete_event(const span::Event& event, int pid, int64_t shift_ns) {
  nlohmann::json out = {{"ph", "X"},  {"name", event.name}, {"cat", event.category}, {"pid", pid},
                        {"tid", event.thread}, {"ts", static_cast<double>(event.start_ns + shift_ns) / 1e3},
                        {"dur", static_cast<double>(event.duration_ns) / 1e3}};
  if (event.arg >= 0) out["args"] = {{"n", event.arg}};
  return out;
}

std::string thread_name(const span::Recording& recording, uint32_t tid) {
  for (const auto& [id, name] : recording.threads)
    if (id == tid) return name;
  return fmt::format("thread {}", tid);
}

}  // namespace

nlohmann::json rank_trace_events(int rank, const span::Recording& recording, int64_t shift_ns) {
  nlohmann::json events = nlohmann::json::array();
  events.push_back(metadata("process_name", rank, 0, fmt::format("rank {}", rank)));
  events.push_back({{"ph", "M"}, {"name", "process_sort_index"}, {"pid", rank}, {"tid", 0}, {"args", {{"sort_index", rank}}}});
  std::set<uint32_t> threads;
  for (const span::Event& event : recording.events) {
    events.push_back(complete_event(event, rank, shift_ns));
    threads.insert(event.thread);
  }
  for (uint32_t tid : threads) events.push_back(metadata("thread_name", rank, tid, thread_name(recording, tid)));
  return events;
}

Timeline::Timeline(dist::Comm& comm, std::filesystem::path file) : comm_(comm), file_(std::move(file)) {
  if (file_.empty()) return;
  offset_ns_ = dist::measure_clock_offset(comm_, kClockRounds, span::now_ns);
  origin_ns_ = span::now_ns() + offset_ns_;
  comm_.broadcast(&origin_ns_, sizeof origin_ns_, 0);
  span::start_recording(kTimelineMaxEvents);
}

Timeline::~Timeline() {
  if (!file_.empty()) (void)span::stop_recording();  // write() was not reached (an error): nothing is written
}

// Collective: every rank's part, rank by rank (rank 0 holds one part at a time); the trace on rank 0 only.
nlohmann::json Timeline::gather(const span::Recording& recording) const {
  const nlohmann::json mine = {{"events", rank_trace_events(comm_.rank(), recording, offset_ns_ - origin_ns_)},
                               {"dropped", recording.dropped}, {"offset_ns", offset_ns_}};
  nlohmann::json events = nlohmann::json::array(), dropped = nlohmann::json::array(), offsets = dropped;
  uint64_t total_dropped = 0;
  for (int rank = 0; rank < comm_.world_size(); ++rank) {
    std::string text = comm_.rank() == rank ? mine.dump() : std::string();
    comm_.broadcast_string(text, rank);
    if (!comm_.is_main_process()) continue;
    nlohmann::json part = nlohmann::json::parse(text);
    for (auto& event : part["events"]) events.push_back(std::move(event));
    total_dropped += part["dropped"].get<uint64_t>();
    dropped.push_back(part["dropped"]), offsets.push_back(part["offset_ns"]);
  }
  const nlohmann::json other = {{"max_events_per_rank", kTimelineMaxEvents}, {"capped", total_dropped > 0},
                                {"dropped_events_per_rank", dropped}, {"clock_offset_ns_per_rank", offsets},
                                {"clock", "rank 0's steady clock, 0 at the timeline's start (Note [Timeline clocks])"}};
  return {{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}, {"otherData", other}};
}

void Timeline::write() {
  if (file_.empty()) return;
  const std::filesystem::path file = std::exchange(file_, {});  // the destructor has nothing left to stop
  const nlohmann::json trace = gather(span::stop_recording());
  dist::run_collectively(comm_, fmt::format("writing the --timeline file '{}'", file.string()), [&] {
    if (!comm_.is_main_process()) return;
    io::write_file_atomically(file, trace.dump() + "\n");
    if (trace["otherData"]["capped"].get<bool>())
      log::warning("--timeline: some spans beyond {} per rank were not kept (otherData.dropped_events_per_rank "
                   "in '{}')", kTimelineMaxEvents, file.string());
  });
}

}  // namespace hpctrain::train
