// Spans: named intervals of wall time on any thread, for the --timeline trace and the per-step times.
//
// `span::Span s("forward");` measures from construction to stop() (or destruction). When a recorder is
// active (start_recording) the span is kept as an Event of this process; either way stop() returns its
// seconds and adds them to the Tally it was given, so the same span feeds metrics.jsonl and the timeline.
// Without a recorder a span costs two steady_clock reads and one relaxed atomic load (Note [Span cost]).
// Names and categories must be string literals (or outlive the recording): events keep the pointers.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace hpctrain::span {

// Nanoseconds of std::chrono::steady_clock (this process's monotonic clock).
[[nodiscard]] int64_t now_ns();

struct Event {
  const char* name = "";
  const char* category = "";
  int64_t start_ns = 0;     // now_ns() at the span's start
  int64_t duration_ns = 0;
  uint32_t thread = 0;      // this_thread_id() of the thread that ran it
  int64_t arg = -1;         // the span's number (step, bucket, batch); -1: none
};

// What one recording holds once stopped.
struct Recording {
  std::vector<Event> events;                           // in the order the spans ended
  std::vector<std::pair<uint32_t, std::string>> threads;  // thread id -> name (name_this_thread)
  uint64_t dropped = 0;                                // spans that ended after the cap was reached
  std::size_t max_events = 0;                          // the cap
};

// Starts keeping the spans that end from now on, at most `max_events` of them (the rest are counted in
// Recording::dropped): memory stays bounded (sizeof(Event) x max_events, reserved here). Throws when a
// recording is already active.
void start_recording(std::size_t max_events);
// Ends the recording and returns it; an empty Recording when none was active.
[[nodiscard]] Recording stop_recording();
// Whether a recording is active (one relaxed atomic load).
[[nodiscard]] bool recording();

// A small number for the calling thread, stable for its lifetime, unique within the process.
[[nodiscard]] uint32_t this_thread_id();
// Names the calling thread in recordings ("main", "communication", "loader"); the last name wins.
void name_this_thread(const char* name);

// Seconds summed per span name (one step's phases). Not thread-safe: one Tally per thread of use.
class Tally {
 public:
  void add(const char* name, double seconds);
  // The sum for `name`; 0 when no span of that name was added.
  [[nodiscard]] double seconds(std::string_view name) const;
  [[nodiscard]] std::size_t count(std::string_view name) const;
  void clear() { entries_.clear(); }

 private:
  struct Entry {
    std::string_view name;
    double seconds = 0;
    std::size_t count = 0;
  };
  std::vector<Entry> entries_;  // a handful of names: a linear search beats a map
};

class Span {
 public:
  explicit Span(const char* name, const char* category = "", int64_t arg = -1, Tally* tally = nullptr)
      : name_(name), category_(category), arg_(arg), tally_(tally), start_ns_(now_ns()) {}
  Span(const char* name, Tally& tally) : Span(name, "", -1, &tally) {}
  ~Span() {
    if (open_) (void)stop();
  }
  Span(const Span&) = delete;
  Span& operator=(const Span&) = delete;

  // Ends the span (once; later calls return the same seconds): records it when a recording is active,
  // adds it to the tally. Returns its seconds.
  double stop();
  [[nodiscard]] int64_t start_ns() const { return start_ns_; }

 private:
  const char* name_;
  const char* category_;
  int64_t arg_;
  Tally* tally_;
  int64_t start_ns_;
  double seconds_ = 0;
  bool open_ = true;
};

// The recorder's entry point for a span that ended; Span::stop calls it only while recording().
void record(const Event& event);

}  // namespace hpctrain::span
