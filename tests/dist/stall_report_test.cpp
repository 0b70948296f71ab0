// The stall inspector's message (src/dist/stall_report.hpp): who waits, who has not arrived, who is silent.
#include <boost/test/unit_test.hpp>

#include "dist/stall_report.hpp"

namespace stall = hpctrain::dist::stall;

namespace {

stall::CommState inside(int64_t comm_id, int64_t number, double seconds) {
  return {comm_id, true, stall::Kind::allreduce, number, number - 1, seconds};
}
stall::CommState idle(int64_t comm_id, int64_t completed, double seconds) {
  return {comm_id, false, stall::Kind::barrier, completed, completed, seconds};
}

}  // namespace

BOOST_AUTO_TEST_SUITE(stall_report)

BOOST_AUTO_TEST_CASE(names_waiting_and_missing_ranks) {
  const stall::CommState mine = inside(0, 57, 300.2);
  const std::vector<stall::RankState> ranks = {{true, {mine}}, {true, {idle(0, 56, 301)}}, {true, {inside(0, 57, 299)}}};
  const std::string text = stall::message(mine, 300, ranks);
  BOOST_TEST(text.find("collective timeout: allreduce #57 did not complete within 300 s; waiting: ranks 0, 2; "
                       "not arrived: rank 1 (last completed collective #56, 301 s ago)") == 0, text);
  BOOST_TEST((stall::waiting_ranks(mine, ranks) == std::vector<int>{0, 2}));
}

BOOST_AUTO_TEST_CASE(duplicates_silent_ranks_and_other_collectives) {
  const stall::CommState mine = inside(1, 3, 10);
  const std::vector<stall::RankState> ranks = {
      {true, {idle(0, 8, 10), mine}}, {true, {inside(0, 9, 11), idle(1, 2, 11)}}, {false, {}, "node-c"}};
  const std::string text = stall::message(mine, 5, ranks);
  BOOST_TEST(text.find("allreduce #3 on duplicate communicator 1 did not complete within 5 s; waiting: rank 0") !=
                 std::string::npos, text);
  BOOST_TEST(text.find("not arrived: rank 1 (last completed collective #2, 11 s ago) (in allreduce #9 for 11 s)") !=
                 std::string::npos, text);
  BOOST_TEST(text.find("no answer from rank 2 on node-c (its process stopped, or its node or the network to it is "
                       "down?)") != std::string::npos, text);
}

BOOST_AUTO_TEST_CASE(states_survive_the_wire) {
  const std::vector<stall::CommState> states = {inside(0, 5, 1.5), idle(2, 7, 0.25)};
  const auto decoded = stall::decode(stall::encode(states));
  BOOST_REQUIRE_EQUAL(decoded.size(), 2u);
  BOOST_TEST(decoded[0].inside);
  BOOST_TEST(decoded[0].entered == 5);
  BOOST_TEST(decoded[0].seconds == 1.5);
  BOOST_TEST(decoded[1].comm_id == 2);
  BOOST_TEST(!decoded[1].inside);
  BOOST_TEST((decoded[1].kind == stall::Kind::barrier));
  BOOST_CHECK_THROW((void)stall::decode({1, 2, 3}), std::exception);
}

BOOST_AUTO_TEST_SUITE_END()
