// split_into_chunks: how counts above MPI's INT_MAX limit are cut into several calls.
#include <boost/test/unit_test.hpp>

#include <climits>

#include "hpctrain/core/error.hpp"
#include "hpctrain/dist/comm.hpp"

using hpctrain::dist::split_into_chunks;

BOOST_AUTO_TEST_SUITE(chunks)

BOOST_AUTO_TEST_CASE(nothing_to_send_gives_no_chunks) { BOOST_TEST(split_into_chunks(0, 5).empty()); }

BOOST_AUTO_TEST_CASE(exact_multiple_and_remainder) {
  const auto even = split_into_chunks(10, 5);
  BOOST_REQUIRE_EQUAL(even.size(), 2u);
  BOOST_TEST(even[1].offset == 5u);
  BOOST_TEST(even[1].count == 5u);
  const auto ragged = split_into_chunks(11, 5);
  BOOST_REQUIRE_EQUAL(ragged.size(), 3u);
  BOOST_TEST(ragged[2].offset == 10u);
  BOOST_TEST(ragged[2].count == 1u);
  const auto small = split_into_chunks(3, 5);
  BOOST_REQUIRE_EQUAL(small.size(), 1u);
  BOOST_TEST(small[0].count == 3u);
}

BOOST_AUTO_TEST_CASE(counts_above_int_max_fit_mpi_int_counts) {
  const std::size_t limit = static_cast<std::size_t>(INT_MAX);
  const std::size_t total = 2 * limit + 3;
  const auto chunks = split_into_chunks(total, limit);
  BOOST_REQUIRE_EQUAL(chunks.size(), 3u);
  std::size_t covered = 0;
  for (const auto& chunk : chunks) {
    BOOST_TEST(chunk.offset == covered);
    BOOST_TEST(chunk.count <= limit);
    covered += chunk.count;
  }
  BOOST_TEST(covered == total);
}

BOOST_AUTO_TEST_CASE(zero_limit_is_rejected) { BOOST_CHECK_THROW(split_into_chunks(4, 0), hpctrain::Error); }

BOOST_AUTO_TEST_SUITE_END()
