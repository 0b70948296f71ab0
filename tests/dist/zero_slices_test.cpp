// zero_bucket_layout / zero_segments (Note [ZeRO slices]): worked examples and the invariants over random
// layouts: slices tile the padded bucket, segments tile every parameter exactly once across the ranks, and
// every cut of an aligned parameter falls on a multiple of its alignment.
#include <boost/test/unit_test.hpp>

#include <random>
#include <vector>

#include "hpctrain/core/error.hpp"
#include "hpctrain/dist/zero_slices.hpp"

using hpctrain::dist::zero_bucket_layout;
using hpctrain::dist::zero_segments;
using hpctrain::dist::ZeroBucketLayout;
using hpctrain::dist::ZeroSegment;

namespace {

void check_zero_invariants(const std::vector<int64_t>& numels, const std::vector<int64_t>& alignments, int world) {
  const ZeroBucketLayout layout = zero_bucket_layout(numels, alignments, world);
  BOOST_REQUIRE_EQUAL(layout.padded_numel, layout.slice_numel * world);
  int64_t end = 0;
  for (std::size_t i = 0; i < numels.size(); ++i) {
    BOOST_REQUIRE_EQUAL(layout.offsets[i] % alignments[i], 0);
    BOOST_REQUIRE_GE(layout.offsets[i], end);  // no overlap, layout order kept
    end = layout.offsets[i] + numels[i];
  }
  BOOST_REQUIRE_LE(end, layout.padded_numel);
  BOOST_REQUIRE_LT(layout.padded_numel - end, world * layout.slice_numel);  // padding below one slice per rank
  std::vector<int64_t> covered(numels.size(), 0);
  for (int rank = 0; rank < world; ++rank) {
    const std::vector<ZeroSegment> segments = zero_segments(layout, numels, rank);
    BOOST_REQUIRE_EQUAL(segments.size(), numels.size());
    for (std::size_t i = 0; i < numels.size(); ++i) {
      const ZeroSegment& s = segments[i];
      if (s.numel() == 0) continue;
      BOOST_REQUIRE_EQUAL(s.begin, covered[i]);  // ranks own consecutive parts, in rank order
      BOOST_REQUIRE_EQUAL(s.begin % alignments[i], 0);
      BOOST_REQUIRE_EQUAL(layout.offsets[i] + s.begin, rank * layout.slice_numel + s.slice_offset);
      BOOST_REQUIRE_LE(s.slice_offset + s.numel(), layout.slice_numel);
      covered[i] = s.end;
    }
  }
  for (std::size_t i = 0; i < numels.size(); ++i) BOOST_REQUIRE_EQUAL(covered[i], numels[i]);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(zero_slices)

BOOST_AUTO_TEST_CASE(unaligned_parameters_pack_as_stage_0_and_pad_to_the_world_size) {
  const ZeroBucketLayout layout = zero_bucket_layout({5, 3, 4}, {1, 1, 1}, 2);
  BOOST_TEST(layout.offsets == (std::vector<int64_t>{0, 5, 8}), boost::test_tools::per_element());
  BOOST_TEST(layout.slice_numel == 6);
  BOOST_TEST(layout.padded_numel == 12);
  const std::vector<ZeroSegment> rank0 = zero_segments(layout, {5, 3, 4}, 0);
  const std::vector<ZeroSegment> rank1 = zero_segments(layout, {5, 3, 4}, 1);
  BOOST_TEST((rank0[0].begin == 0 && rank0[0].end == 5 && rank0[0].slice_offset == 0));
  BOOST_TEST((rank0[1].begin == 0 && rank0[1].end == 1 && rank0[1].slice_offset == 5));  // the cut: 1 of 3
  BOOST_TEST(rank0[2].numel() == 0);
  BOOST_TEST(rank1[0].numel() == 0);
  BOOST_TEST((rank1[1].begin == 1 && rank1[1].end == 3 && rank1[1].slice_offset == 0));
  BOOST_TEST((rank1[2].begin == 0 && rank1[2].end == 4 && rank1[2].slice_offset == 2));
}

BOOST_AUTO_TEST_CASE(aligned_parameters_are_cut_on_block_boundaries) {
  // a small parameter, then an 8-bit one of 5000 elements (alignment 256), on 3 ranks
  const std::vector<int64_t> numels{100, 5000}, alignments{1, 256};
  const ZeroBucketLayout layout = zero_bucket_layout(numels, alignments, 3);
  BOOST_TEST(layout.offsets[1] == 256);
  BOOST_TEST(layout.slice_numel % 256 == 0);
  for (int rank = 0; rank < 3; ++rank) BOOST_TEST(zero_segments(layout, numels, rank)[1].begin % 256 == 0);
  check_zero_invariants(numels, alignments, 3);
}

BOOST_AUTO_TEST_CASE(invariants_hold_on_random_layouts) {
  std::mt19937 random(7);
  for (int trial = 0; trial < 500; ++trial) {
    const int world = 1 + static_cast<int>(random() % 8);
    const std::size_t count = 1 + random() % 6;
    std::vector<int64_t> numels, alignments;
    for (std::size_t i = 0; i < count; ++i) {
      numels.push_back(static_cast<int64_t>(random() % 3000));
      alignments.push_back(random() % 3 == 0 ? 256 : 1);
    }
    check_zero_invariants(numels, alignments, world);
  }
}

BOOST_AUTO_TEST_CASE(bad_input_is_refused) {
  BOOST_CHECK_THROW((void)zero_bucket_layout({4}, {1}, 0), hpctrain::Error);
  BOOST_CHECK_THROW((void)zero_bucket_layout({4}, {0}, 2), hpctrain::Error);
  BOOST_CHECK_THROW((void)zero_bucket_layout({4, 2}, {1}, 2), hpctrain::Error);
}

BOOST_AUTO_TEST_SUITE_END()
