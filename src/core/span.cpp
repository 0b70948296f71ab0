// The process's span recorder (core/span.hpp): one capped event buffer behind a mutex, thread names, tallies.
//
// Note [Span cost]: Span::stop checks `g_active` with one relaxed load; only while a recording is active
// does it take the recorder's mutex. A training step ends a few dozen spans (phases, buckets, batches), so
// one short critical section per span costs far less than a per-thread buffer's bookkeeping would save.
#include "hpctrain/core/span.hpp"

#include <chrono>
#include <map>
#include <mutex>

#include "hpctrain/core/error.hpp"

namespace hpctrain::span {
namespace {

std::atomic<bool> g_active{false};
std::atomic<uint32_t> g_next_thread{0};

struct Recorder {
  std::mutex mutex;
  Recording recording;                    // guarded by mutex
  std::map<uint32_t, std::string> names;  // guarded by mutex; kept across recordings (threads outlive them)
};

Recorder& recorder() {
  static Recorder* instance = new Recorder;  // never destroyed: threads may end spans during exit
  return *instance;
}

}  // namespace

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void start_recording(std::size_t max_events) {
  Recorder& r = recorder();
  std::lock_guard<std::mutex> lock(r.mutex);
  HPCTRAIN_CHECK(!g_active.load(), "span::start_recording: a recording is already active");
  r.recording = Recording{};
  r.recording.max_events = max_events;
  r.recording.events.reserve(max_events);
  g_active.store(true, std::memory_order_release);
}

Recording stop_recording() {
  Recorder& r = recorder();
  std::lock_guard<std::mutex> lock(r.mutex);
  if (!g_active.load()) return {};
  g_active.store(false, std::memory_order_release);
  Recording out = std::move(r.recording);
  r.recording = Recording{};
  for (const auto& [id, name] : r.names) out.threads.emplace_back(id, name);
  return out;
}

bool recording() { return g_active.load(std::memory_order_relaxed); }

uint32_t this_thread_id() {
  thread_local const uint32_t id = g_next_thread.fetch_add(1, std::memory_order_relaxed);
  return id;
}

void name_this_thread(const char* name) {
  Recorder& r = recorder();
  const uint32_t id = this_thread_id();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.names[id] = name;
}

void record(const Event& event) {
  Recorder& r = recorder();
  std::lock_guard<std::mutex> lock(r.mutex);
  if (!g_active.load(std::memory_order_relaxed)) return;  // stopped meanwhile
  if (r.recording.events.size() < r.recording.max_events) {
    r.recording.events.push_back(event);
  } else {
    ++r.recording.dropped;
  }
}

void Tally::add(const char* name, double seconds) {
  for (Entry& entry : entries_) {
    if (entry.name == name) {
      entry.seconds += seconds, ++entry.count;
      return;
    }
  }
  entries_.push_back(Entry{name, seconds, 1});
}

double Tally::seconds(std::string_view name) const {
  for (const Entry& entry : entries_)
    if (entry.name == name) return entry.seconds;
  return 0;
}

std::size_t Tally::count(std::string_view name) const {
  for (const Entry& entry : entries_)
    if (entry.name == name) return entry.count;
  return 0;
}

double Span::stop() {
  if (!open_) return seconds_;
  open_ = false;
  const int64_t end_ns = now_ns();
  seconds_ = static_cast<double>(end_ns - start_ns_) * 1e-9;
  if (tally_ != nullptr) tally_->add(name_, seconds_);
  if (recording()) record(Event{name_, category_, start_ns_, end_ns - start_ns_, this_thread_id(), arg_});
  return seconds_;
}

}  // namespace hpctrain::span
