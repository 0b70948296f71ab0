// assign_buckets: worked examples, edge cases and invariants over many random size lists.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <map>
#include <numeric>
#include <random>
#include <utility>

#include "hpctrain/core/error.hpp"
#include "hpctrain/dist/buckets.hpp"

using hpctrain::dist::assign_buckets;
using hpctrain::dist::Bucket;
using Buckets = std::vector<Bucket>;

namespace {

int group_of(const std::vector<int>& groups, std::size_t index) { return groups.empty() ? 0 : groups[index]; }

// Checks everything assign_buckets promises for one input.
void check_invariants(const std::vector<int64_t>& sizes, const std::vector<int>& groups, int64_t first_cap,
                      int64_t cap) {
  const Buckets buckets = assign_buckets(sizes, groups, first_cap, cap);
  std::vector<int> seen(sizes.size(), 0);
  for (const Bucket& bucket : buckets) {
    BOOST_REQUIRE(!bucket.empty());
    for (std::size_t k = 0; k < bucket.size(); ++k) {
      BOOST_REQUIRE_LT(bucket[k], sizes.size());
      ++seen[bucket[k]];
      if (k > 0) BOOST_TEST(bucket[k] < bucket[k - 1]);  // reverse registration order inside a bucket
      BOOST_TEST(group_of(groups, bucket[k]) == group_of(groups, bucket[0]));  // one group per bucket
    }
  }
  for (std::size_t i = 0; i < sizes.size(); ++i) BOOST_TEST(seen[i] == 1, "parameter " << i << " seen " << seen[i]);
  for (std::size_t b = 1; b < buckets.size(); ++b) BOOST_TEST(buckets[b].back() < buckets[b - 1].back());

  // Greedy closing, per group in visit order: the cap in force is first_cap until the group's first
  // bucket closes, then cap. A parameter above the cap in force stands alone; any other bucket holds
  // no more than it needed to reach the cap, and stays below it only when it is the group's last or
  // was closed by an oversized successor.
  std::map<int, std::vector<const Bucket*>> by_group;
  std::vector<const Bucket*> in_visit_order;
  for (const Bucket& bucket : buckets) in_visit_order.push_back(&bucket);
  std::sort(in_visit_order.begin(), in_visit_order.end(),
            [](const Bucket* a, const Bucket* b) { return a->front() > b->front(); });
  for (const Bucket* bucket : in_visit_order) by_group[group_of(groups, bucket->front())].push_back(bucket);
  for (const auto& [group, list] : by_group) {
    bool closed_previous = false;  // this bucket is the oversized parameter that closed the previous one
    for (std::size_t b = 0; b < list.size(); ++b) {
      const Bucket& bucket = *list[b];
      const int64_t cap_in_force = b == 0 ? first_cap : cap;
      if (std::exchange(closed_previous, false)) continue;                   // checked with the previous
      if (bucket.size() == 1 && sizes[bucket[0]] > cap_in_force) continue;  // oversized: alone
      int64_t before_last = 0;
      for (std::size_t k = 0; k + 1 < bucket.size(); ++k) before_last += sizes[bucket[k]];
      const int64_t total = before_last + sizes[bucket.back()];
      BOOST_TEST(before_last < cap_in_force);
      for (std::size_t index : bucket) BOOST_TEST(sizes[index] <= cap_in_force);
      if (total < cap_in_force && b + 1 < list.size()) {
        const Bucket& next = *list[b + 1];
        BOOST_TEST((next.size() == 1 && sizes[next.front()] > cap_in_force),
                   "group " << group << " bucket " << b << " closed early without an oversized successor");
        closed_previous = true;
      }
    }
  }
}

}  // namespace

BOOST_AUTO_TEST_SUITE(buckets)

BOOST_AUTO_TEST_CASE(empty_input_gives_no_buckets) { BOOST_TEST(assign_buckets({}).empty()); }

BOOST_AUTO_TEST_CASE(first_bucket_small_then_large) {
  // Visit order 6..0: {6,5} reaches the first cap (10), then {4..0} reaches 25.
  const Buckets expected{{6, 5}, {4, 3, 2, 1, 0}};
  BOOST_TEST(assign_buckets({5, 5, 5, 5, 5, 5, 5}, 10, 25) == expected);
}

BOOST_AUTO_TEST_CASE(remainder_forms_last_bucket) {
  const Buckets expected{{5, 4}, {3, 2, 1}, {0}};
  BOOST_TEST(assign_buckets({4, 4, 4, 4, 4, 4}, 8, 12) == expected);
}

BOOST_AUTO_TEST_CASE(oversized_parameter_gets_its_own_bucket) {
  const Buckets expected{{3}, {2}, {1, 0}};
  BOOST_TEST(assign_buckets({1, 1, 100, 1}, 10, 25) == expected);
}

BOOST_AUTO_TEST_CASE(one_huge_tensor) {
  const Buckets expected{{0}};
  BOOST_TEST(assign_buckets({int64_t{1} << 40}) == expected);
}

BOOST_AUTO_TEST_CASE(parameter_exactly_at_cap_closes_the_bucket) {
  const Buckets expected{{2}, {1}, {0}};
  BOOST_TEST(assign_buckets({25, 25, 10}, 10, 25) == expected);
}

BOOST_AUTO_TEST_CASE(zero_size_parameters_join_a_bucket) {
  const Buckets all_zero{{2, 1, 0}};
  BOOST_TEST(assign_buckets({0, 0, 0}, 10, 25) == all_zero);
  const Buckets mixed{{3, 2}, {1, 0}};
  BOOST_TEST(assign_buckets({0, 0, 10, 0}, 10, 25) == mixed);
}

BOOST_AUTO_TEST_CASE(default_caps_are_one_and_twenty_five_mebibytes) {
  const int64_t mib = int64_t{1} << 20;
  // 30 tensors of 1 MiB: the first bucket holds one, then 25 per bucket, then the remaining 4.
  const Buckets buckets = assign_buckets(std::vector<int64_t>(30, mib));
  BOOST_REQUIRE_EQUAL(buckets.size(), 3u);
  BOOST_TEST(buckets[0].size() == 1u);
  BOOST_TEST(buckets[1].size() == 25u);
  BOOST_TEST(buckets[2].size() == 4u);
  BOOST_TEST(buckets[0].front() == 29u);
}

BOOST_AUTO_TEST_CASE(groups_never_share_a_bucket) {
  // Visit 3 (g1), 2 (g0), 1 (g1: closes {3,1}), 0 (g0: closes {2,0}).
  const Buckets expected{{3, 1}, {2, 0}};
  BOOST_TEST(assign_buckets({4, 4, 4, 4}, {0, 1, 0, 1}, 8, 8) == expected);
}

BOOST_AUTO_TEST_CASE(each_group_has_its_own_first_bucket) {
  // Group 1's first bucket closes at 4 bytes even though group 0 already closed its first.
  const Buckets expected{{5, 4}, {3}, {2, 1, 0}};
  BOOST_TEST(assign_buckets({4, 4, 4, 4, 2, 2}, {1, 1, 1, 1, 0, 0}, 4, 100) == expected);
}

BOOST_AUTO_TEST_CASE(invalid_input_is_rejected) {
  BOOST_CHECK_THROW(assign_buckets({1, -1}), hpctrain::Error);
  BOOST_CHECK_THROW(assign_buckets({1}, 0, 25), hpctrain::Error);
  BOOST_CHECK_THROW(assign_buckets({1}, 10, 0), hpctrain::Error);
  BOOST_CHECK_THROW(assign_buckets({1, 2}, {0}, 10, 25), hpctrain::Error);
}

BOOST_AUTO_TEST_CASE(invariants_hold_for_random_inputs) {
  std::mt19937_64 rng(1234);
  for (int trial = 0; trial < 2000; ++trial) {
    const std::size_t count = rng() % 40;
    const int group_count = 1 + static_cast<int>(rng() % 3);
    std::vector<int64_t> sizes(count);
    std::vector<int> groups(count);
    for (std::size_t i = 0; i < count; ++i) {
      const uint64_t kind = rng() % 10;
      sizes[i] = kind == 0 ? 0 : kind == 1 ? 50 + static_cast<int64_t>(rng() % 100) : static_cast<int64_t>(rng() % 12);
      groups[i] = static_cast<int>(rng() % group_count);
    }
    const int64_t first_cap = 1 + static_cast<int64_t>(rng() % 20);
    const int64_t cap = 1 + static_cast<int64_t>(rng() % 60);
    check_invariants(sizes, group_count == 1 ? std::vector<int>{} : groups, first_cap, cap);
  }
}

BOOST_AUTO_TEST_SUITE_END()
