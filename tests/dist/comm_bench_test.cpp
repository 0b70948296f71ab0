// The comm bench's pure parts: message sizes, the ring α-β fit (Note [Ring alpha-beta]) and its evaluation;
// time_allreduce on the single-process communicator.
#include <boost/test/unit_test.hpp>

#include "hpctrain/core/error.hpp"
#include "hpctrain/dist/comm_bench.hpp"

using namespace hpctrain::dist;

namespace {

// Exact ring timings for a known α-β (the fit must give them back).
std::vector<AllreduceTiming> ring_timings(const AlphaBeta& truth, int ranks, const std::vector<int64_t>& sizes) {
  std::vector<AllreduceTiming> out;
  for (const int64_t n : sizes) {
    const double t = ranks == 1 ? truth.alpha_s + static_cast<double>(n) * truth.beta_s_per_byte
                                : ring_allreduce_seconds(truth, n, ranks);
    out.push_back({n, t, t, t, 1});
  }
  return out;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(comm_bench)

BOOST_AUTO_TEST_CASE(message_sizes_by_factor) {
  BOOST_TEST(message_sizes(1024, 65536, 4) == (std::vector<int64_t>{1024, 4096, 16384, 65536}), boost::test_tools::per_element());
  BOOST_TEST(message_sizes(1024, 8192, 2) == (std::vector<int64_t>{1024, 2048, 4096, 8192}), boost::test_tools::per_element());
  BOOST_TEST(message_sizes(1024, 1000000, 4).back() == 262144);  // never above the maximum
  BOOST_CHECK_THROW(message_sizes(2, 1024, 2), hpctrain::Error);
  BOOST_CHECK_THROW(message_sizes(4096, 1024, 2), hpctrain::Error);
  BOOST_CHECK_THROW(message_sizes(1024, 4096, 1), hpctrain::Error);
}

BOOST_AUTO_TEST_CASE(ring_cost_by_hand) {
  const AlphaBeta m{1e-3, 1e-5};
  BOOST_TEST(ring_allreduce_seconds(m, 100, 1) == 0.0);
  BOOST_TEST(ring_allreduce_seconds(m, 100, 2) == 2e-3 + 100 * 1e-5, boost::test_tools::tolerance(1e-12));
  // p = 4: 2·3 α + 2·3/4 · 300 · β = 6e-3 + 4.5e-3
  BOOST_TEST(ring_allreduce_seconds(m, 300, 4) == 10.5e-3, boost::test_tools::tolerance(1e-12));
}

BOOST_AUTO_TEST_CASE(fit_recovers_the_ring_parameters) {
  const std::vector<int64_t> sizes = message_sizes(1024, 1 << 26, 4);
  for (const int ranks : {1, 2, 4, 16}) {
    const AlphaBeta truth{3e-6, 0.4e-9};
    const AlphaBeta fit = fit_ring_alpha_beta(ring_timings(truth, ranks, sizes), ranks);
    BOOST_TEST_CONTEXT("ranks " << ranks) {
      BOOST_TEST(fit.alpha_s == truth.alpha_s, boost::test_tools::tolerance(1e-9));
      BOOST_TEST(fit.beta_s_per_byte == truth.beta_s_per_byte, boost::test_tools::tolerance(1e-9));
    }
  }
}

BOOST_AUTO_TEST_CASE(fit_through_two_points) {
  // Two points: the line through them whatever the weights, t = 20 µs + n · 1 ns; on 2 ranks
  // t = 2 α + n β, so α = 10 µs and β = 1 ns per byte.
  std::vector<AllreduceTiming> t{{1000, 21e-6, 0, 0, 1}, {1001000, 1021e-6, 0, 0, 1}};
  const AlphaBeta fit = fit_ring_alpha_beta(t, 2);
  BOOST_TEST(fit.beta_s_per_byte == 1e-9, boost::test_tools::tolerance(1e-9));
  BOOST_TEST(fit.alpha_s == 10e-6, boost::test_tools::tolerance(1e-9));
}

BOOST_AUTO_TEST_CASE(fit_keeps_alpha_non_negative) {
  // 1 MiB at 0.2 ns/B, 16 MiB at 0.6 ns/B (a cache cliff): the free line has a negative intercept. With α = 0,
  // β = Σ(n/t) / Σ(n²/t²) with n/t = 1/r for r = t/n: (1/0.2 + 1/0.6) / (1/0.2² + 1/0.6²) ns/B (2 ranks: t = n β).
  const double mib = 1 << 20;
  std::vector<AllreduceTiming> t{{1 << 20, 0.2e-9 * mib, 0, 0, 1}, {16 << 20, 0.6e-9 * 16 * mib, 0, 0, 1}};
  const AlphaBeta fit = fit_ring_alpha_beta(t, 2);
  BOOST_TEST(fit.alpha_s == 0.0);
  BOOST_TEST(fit.beta_s_per_byte == (5 + 1 / 0.6) / (25 + 1 / 0.36) * 1e-9, boost::test_tools::tolerance(1e-9));
}

BOOST_AUTO_TEST_CASE(fit_refuses_bad_input) {
  BOOST_CHECK_THROW(fit_ring_alpha_beta({{1024, 1e-5, 0, 0, 1}}, 2), hpctrain::Error);
  BOOST_CHECK_THROW(fit_ring_alpha_beta({{1024, 1e-5, 0, 0, 1}, {1024, 2e-5, 0, 0, 1}}, 2), hpctrain::Error);
  BOOST_CHECK_THROW(fit_ring_alpha_beta({{1024, 0, 0, 0, 1}, {4096, 1e-5, 0, 0, 1}}, 2), hpctrain::Error);
}

BOOST_AUTO_TEST_CASE(timing_on_one_process) {
  const auto comm = make_single_process_comm();
  const auto timings = time_allreduce(*comm, {1024, 4096}, 1, 3);
  BOOST_TEST_REQUIRE(timings.size() == 2U);
  for (const auto& t : timings) {
    BOOST_TEST(t.repetitions == 3);
    BOOST_TEST(t.min_s <= t.median_s);
    BOOST_TEST(t.median_s <= t.max_s);
  }
  BOOST_CHECK_THROW(time_allreduce(*comm, {1024}, 0, 0), hpctrain::Error);
}

BOOST_AUTO_TEST_SUITE_END()
