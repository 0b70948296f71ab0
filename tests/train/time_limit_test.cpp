// --max-time parsing, the time budget (with SLURM_JOB_END_TIME), the stop decision, and the stop-reason
// encoding the ranks agree on (Note [Stop agreement]).
#include <boost/test/unit_test.hpp>

#include <csignal>
#include <limits>

#include "hpctrain/core/error.hpp"
#include "hpctrain/core/stop_request.hpp"
#include "hpctrain/train/time_limit.hpp"

using namespace hpctrain::train;
namespace core = hpctrain::core;

BOOST_AUTO_TEST_SUITE(time_limit)

BOOST_AUTO_TEST_CASE(parses_hours_minutes_seconds_and_plain_seconds) {
  BOOST_TEST(parse_duration("00:00:08") == 8.0);
  BOOST_TEST(parse_duration("01:30:00") == 5400.0);
  BOOST_TEST(parse_duration("36:00:01") == 129601.0);  // hours may exceed a day
  BOOST_TEST(parse_duration("5400") == 5400.0);
  BOOST_TEST(parse_duration("90.5") == 90.5);
}

BOOST_AUTO_TEST_CASE(rejects_malformed_durations_naming_the_option) {
  for (const char* bad : {"", "0", "00:00:00", "1:60:00", "1:00:60", "1:2", "1:2:3:4", "-5", "1e3", "ten",
                          "1:-1:00", "01:30:00x", ":30:00", "nan"}) {
    BOOST_TEST_CONTEXT(bad) {
      BOOST_CHECK_EXCEPTION((void)parse_duration(bad), hpctrain::Error, [](const hpctrain::Error& e) {
        return std::string(e.what()).find("--max-time") != std::string::npos &&
               std::string(e.what()).find("HH:MM:SS") != std::string::npos;
      });
    }
  }
}

BOOST_AUTO_TEST_CASE(budget_is_the_smaller_of_max_time_and_the_job_end) {
  const double inf = std::numeric_limits<double>::infinity();
  BOOST_TEST(time_budget(0, nullptr, 1000) == inf);
  BOOST_TEST(time_budget(0, "", 1000) == inf);
  BOOST_TEST(time_budget(600, nullptr, 1000) == 600.0);
  BOOST_TEST(time_budget(600, "1300", 1000) == 300.0);   // the job ends first
  BOOST_TEST(time_budget(600, "5000", 1000) == 600.0);   // --max-time ends first
  BOOST_TEST(time_budget(0, "1300", 1000) == 300.0);
  BOOST_CHECK_THROW((void)time_budget(0, "soon", 1000), hpctrain::Error);
}

BOOST_AUTO_TEST_CASE(slurm_time_left_parses_squeue_formats) {
  BOOST_TEST(*parse_slurm_time_left("1-02:03:04") == 93784.0);
  BOOST_TEST(*parse_slurm_time_left("02:03:04") == 7384.0);
  BOOST_TEST(*parse_slurm_time_left("59:30") == 3570.0);
  BOOST_TEST(*parse_slurm_time_left("45") == 45.0);
  for (const char* none : {"UNLIMITED", "NOT_SET", "INVALID", "", "1:2:3:4", "x-01:00:00", "00:61:00"})
    BOOST_TEST(!parse_slurm_time_left(none).has_value(), none);
}

BOOST_AUTO_TEST_CASE(stops_when_the_rest_does_not_cover_a_step_and_a_save) {
  StopMargin margin;
  margin.minimum = 5;
  const double inf = std::numeric_limits<double>::infinity();
  BOOST_TEST(!time_to_stop(1e9, inf, margin));  // no limit: never
  BOOST_TEST(!time_to_stop(94.9, 100, margin));  // the minimum margin: 5 s
  BOOST_TEST(time_to_stop(95, 100, margin));
  margin.longest_step = 8, margin.last_save = 4;  // measured: 12 s > minimum
  BOOST_TEST(margin.seconds() == 12.0);
  BOOST_TEST(!time_to_stop(87.9, 100, margin));
  BOOST_TEST(time_to_stop(88, 100, margin));
  BOOST_TEST(time_to_stop(200, 100, margin));  // already past: stop at once
  BOOST_TEST(time_to_stop(0, -3, margin));     // the job's end time lies in the past
}

BOOST_AUTO_TEST_CASE(stop_reason_round_trips_and_max_prefers_signals_then_low_ranks) {
  const auto code = [](int signo, bool time, int rank) { return core::encode_stop_reason({signo, time, rank}); };
  BOOST_TEST(code(0, false, 3) == 0.0);
  for (const core::StopReason r : {core::StopReason{SIGTERM, false, 0}, core::StopReason{SIGUSR1, false, 4095},
                                   core::StopReason{0, true, 7}, core::StopReason{SIGINT, true, 1}}) {
    const core::StopReason back = core::decode_stop_reason(core::encode_stop_reason(r));
    BOOST_TEST(back.signo == r.signo);
    BOOST_TEST(back.time_limit == (r.signo == 0 && r.time_limit));
    BOOST_TEST(back.rank == r.rank);
  }
  BOOST_TEST(code(SIGTERM, false, 9) > code(0, true, 0));       // a signal beats the time limit
  BOOST_TEST(code(SIGTERM, false, 1) > code(SIGTERM, false, 2));  // the lower rank is named
  BOOST_TEST(core::describe(core::decode_stop_reason(code(SIGTERM, false, 1))) == "SIGTERM on rank 1");
  BOOST_TEST(core::describe(core::decode_stop_reason(code(0, true, 0))) == "the time limit (rank 0)");
}

BOOST_AUTO_TEST_CASE(first_signal_only_sets_the_flag) {
  core::install_stop_handlers();
  BOOST_TEST(core::stop_signal() == 0);
  std::raise(SIGUSR1);  // the handler returns: the process goes on
  BOOST_TEST(core::stop_signal() == SIGUSR1);
  core::reset_stop_request();
  BOOST_TEST(core::stop_signal() == 0);
  std::signal(SIGTERM, SIG_DFL), std::signal(SIGINT, SIG_DFL), std::signal(SIGUSR1, SIG_DFL);
}

BOOST_AUTO_TEST_SUITE_END()
