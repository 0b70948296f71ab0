// core/span.hpp: recording from several threads, the cap, per-name tallies, and spans with no recorder.
#include <boost/test/unit_test.hpp>

#include <thread>
#include <vector>

#include "hpctrain/core/error.hpp"
#include "hpctrain/core/span.hpp"

namespace span = hpctrain::span;

namespace {
void busy_for_ns(int64_t ns) {
  const int64_t until = span::now_ns() + ns;
  while (span::now_ns() < until) {
  }
}
}  // namespace

BOOST_AUTO_TEST_SUITE(spans)

BOOST_AUTO_TEST_CASE(without_a_recorder_spans_still_time_and_tally_but_keep_nothing) {
  BOOST_REQUIRE(!span::recording());
  span::Tally tally;
  double seconds = 0;
  {
    span::Span s("forward", tally);
    busy_for_ns(2'000'000);
    seconds = s.stop();
    BOOST_TEST(s.stop() == seconds);  // a second stop changes nothing
  }
  BOOST_TEST(seconds >= 2e-3);
  BOOST_TEST(tally.seconds("forward") == seconds);
  BOOST_TEST(tally.count("forward") == 1u);
  for (int i = 0; i < 1000; ++i) span::Span ignored("cheap");
  span::start_recording(10);
  const span::Recording nothing = span::stop_recording();
  BOOST_TEST(nothing.events.empty());  // spans that ended before the recording are not in it
  BOOST_TEST(span::stop_recording().events.empty());  // stopping twice: an empty recording
}

BOOST_AUTO_TEST_CASE(tally_sums_per_name) {
  span::Tally tally;
  tally.add("data wait", 0.5);
  tally.add("forward", 1.0);
  tally.add("data wait", 0.25);
  BOOST_TEST(tally.seconds("data wait") == 0.75);
  BOOST_TEST(tally.count("data wait") == 2u);
  BOOST_TEST(tally.seconds("forward") == 1.0);
  BOOST_TEST(tally.seconds("backward") == 0.0);
  tally.clear();
  BOOST_TEST(tally.seconds("forward") == 0.0);
}

BOOST_AUTO_TEST_CASE(spans_of_several_threads_are_kept_with_their_thread_and_nesting) {
  span::start_recording(1000);
  BOOST_CHECK_THROW(span::start_recording(5), hpctrain::Error);
  span::name_this_thread("main");
  const uint32_t main_id = span::this_thread_id();
  uint32_t worker_ids[3] = {};
  {
    span::Span outer("step", "train", 7);
    std::vector<std::thread> workers;
    for (int w = 0; w < 3; ++w) {
      workers.emplace_back([w, &worker_ids] {
        span::name_this_thread("communication");
        worker_ids[w] = span::this_thread_id();
        for (int i = 0; i < 100; ++i) span::Span s("allreduce", "communication", i);
      });
    }
    for (auto& worker : workers) worker.join();
    span::Span inner("forward", "train");
  }
  const span::Recording r = span::stop_recording();
  BOOST_REQUIRE_EQUAL(r.events.size(), 302u);
  BOOST_TEST(r.dropped == 0u);
  std::size_t per_worker[3] = {};
  for (const span::Event& e : r.events)
    for (int w = 0; w < 3; ++w) per_worker[w] += e.thread == worker_ids[w] ? 1 : 0;
  for (int w = 0; w < 3; ++w) BOOST_TEST(per_worker[w] == 100u);
  const span::Event& inner = r.events[300];
  const span::Event& outer = r.events[301];
  BOOST_TEST(std::string(outer.name) == "step");
  BOOST_TEST(outer.arg == 7);
  BOOST_TEST(outer.thread == main_id);
  BOOST_TEST(inner.start_ns >= outer.start_ns);
  BOOST_TEST(inner.start_ns + inner.duration_ns <= outer.start_ns + outer.duration_ns);
  int named = 0;
  for (const auto& [id, name] : r.threads)
    named += (id == main_id && name == "main") || (id == worker_ids[0] && name == "communication");
  BOOST_TEST(named == 2);
}

BOOST_AUTO_TEST_CASE(the_cap_bounds_the_events_and_counts_the_rest) {
  span::start_recording(5);
  for (int i = 0; i < 12; ++i) span::Span s("load batch", "loader", i);
  const span::Recording r = span::stop_recording();
  BOOST_TEST(r.events.size() == 5u);
  BOOST_TEST(r.dropped == 7u);
  BOOST_TEST(r.max_events == 5u);
  BOOST_TEST(r.events[4].arg == 4);
}

BOOST_AUTO_TEST_SUITE_END()
