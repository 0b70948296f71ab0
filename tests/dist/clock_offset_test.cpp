// dist::estimate_clock_offset: rank 0's clock minus this rank's from measured ping-pongs; measure on one rank.
#include <boost/test/unit_test.hpp>

#include "hpctrain/core/error.hpp"
#include "hpctrain/core/span.hpp"
#include "hpctrain/dist/clock_offset.hpp"

using hpctrain::dist::estimate_clock_offset;
using hpctrain::dist::PingPong;

BOOST_AUTO_TEST_SUITE(clock_offset)

BOOST_AUTO_TEST_CASE(symmetric_round_trip_gives_the_true_offset) {
  // Rank 0's clock is 1'000'000 ns ahead; the message takes 50 ns each way.
  BOOST_TEST(estimate_clock_offset({PingPong{100, 1'000'150, 200}}) == 1'000'000);
  // Behind by 3 s.
  BOOST_TEST(estimate_clock_offset({PingPong{5'000'000'000, 2'000'000'010, 5'000'000'020}}) == -3'000'000'000);
}

BOOST_AUTO_TEST_CASE(the_shortest_round_trip_wins) {
  // True offset 1000; the slow ping-pongs were delayed on one leg (their estimates: 6000 and -9000).
  const std::vector<PingPong> samples = {PingPong{0, 11'000, 10'000}, PingPong{20'000, 21'010, 20'020},
                                         PingPong{30'000, 31'000 - 5'000 + 10, 40'000 + 20}};
  BOOST_TEST(estimate_clock_offset(samples) == 1000);
  std::vector<PingPong> reversed(samples.rbegin(), samples.rend());
  BOOST_TEST(estimate_clock_offset(reversed) == 1000);
}

BOOST_AUTO_TEST_CASE(bad_samples_are_refused) {
  BOOST_CHECK_THROW((void)estimate_clock_offset({}), hpctrain::Error);
  BOOST_CHECK_THROW((void)estimate_clock_offset({PingPong{200, 0, 100}}), hpctrain::Error);
}

BOOST_AUTO_TEST_CASE(one_rank_has_no_offset) {
  const auto comm = hpctrain::dist::make_single_process_comm();
  BOOST_TEST(hpctrain::dist::measure_clock_offset(*comm, 3, hpctrain::span::now_ns) == 0);
}

BOOST_AUTO_TEST_SUITE_END()
