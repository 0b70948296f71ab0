// Note [Best-fit-decreasing rows]: the rows of `prep lm --packing bfd` and bfd_split against TRL's pack_dataset
// (golden/bfd_rows.json, from golden/generate_bfd_goldens.py), and the plan that places them; pure functions.
#include <boost/test/unit_test.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <fstream>
#include <numeric>
#include <vector>

#include "hpctrain/core/error.hpp"
#include "hpctrain/data/examples.hpp"
#include "prep/lm_packing.hpp"

using namespace hpctrain::prep::detail;

namespace {

using Segment = std::array<int64_t, 3>;  // document, first token in it, tokens

nlohmann::json golden_cases() {
  std::ifstream in(std::string(HPCTRAIN_TEST_DATA_DIR) + "/prep/golden/bfd_rows.json");
  BOOST_TEST_REQUIRE(in.good());
  return nlohmann::json::parse(in)["cases"];
}

// The segments of documents of `lengths` tokens, in input order, as the plan makes them.
std::vector<Segment> segments_of(const std::vector<uint32_t>& lengths, int64_t capacity, bool split_long) {
  std::vector<Segment> out;
  for (std::size_t d = 0; d < lengths.size(); ++d)
    for_each_segment(lengths[d], capacity, split_long, [&](int64_t first, int64_t count) {
      out.push_back({static_cast<int64_t>(d), first, count});
    });
  return out;
}

std::vector<uint32_t> lengths_of(const std::vector<Segment>& segments) {
  std::vector<uint32_t> out;
  for (const auto& segment : segments) out.push_back(static_cast<uint32_t>(segment[2]));
  return out;
}

}  // namespace

BOOST_AUTO_TEST_CASE(bfd_rows_equal_trl_pack_dataset) {
  for (const auto& golden : golden_cases()) {
    const auto capacity = golden["capacity"].get<int64_t>();
    const bool split_long = golden["split"].get<bool>();
    const auto segments = segments_of(golden["lengths"].get<std::vector<uint32_t>>(), capacity, split_long);
    const Bins bins = best_fit_decreasing(lengths_of(segments), static_cast<uint32_t>(capacity));
    const auto expected = golden["rows"].get<std::vector<std::vector<Segment>>>();
    BOOST_TEST_CONTEXT("capacity " << capacity << (split_long ? ", bfd_split" : ", bfd")) {
      BOOST_TEST_REQUIRE(bins.size() == expected.size());
      for (std::size_t row = 0; row < bins.size(); ++row) {
        std::vector<Segment> got;
        for (uint32_t k = bins.first[row]; k < bins.first[row + 1]; ++k) got.push_back(segments[bins.segments[k]]);
        BOOST_TEST((got == expected[row]), "row " << row);
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(bfd_plan_places_every_segment_once_in_shuffled_rows) {
  LmPlan plan = plan_documents({{1, 1, 1, 1, 1, 1, 1, 1}}, 0.25, 5);
  std::vector<std::vector<uint32_t>> lengths(2);
  const std::vector<uint32_t> all = {3, 9, 1, 4, 4, 2, 7, 5};
  for (std::size_t d = 0; d < all.size(); ++d) lengths[plan.documents.files[0].split[d]].push_back(all[d]);
  for (bool split_long : {false, true}) {
    plan_document_rows(plan, lengths, 6, split_long, 11);
    BOOST_TEST(plan.row_position.empty());
    for (std::size_t s = 0; s < 2; ++s) {
      const auto segments = segments_of(lengths[s], 6, split_long);
      BOOST_TEST(plan.segments[s] == static_cast<int64_t>(segments.size()));
      auto place = plan.segment_position[s];
      std::sort(place.begin(), place.end());
      std::vector<uint32_t> expected(segments.size());
      std::iota(expected.begin(), expected.end(), 0u);
      BOOST_TEST(place == expected, boost::test_tools::per_element());  // a permutation
      const auto& counts = plan.row_segments[s];
      BOOST_TEST(static_cast<int64_t>(counts.size()) == plan.rows[s]);
      BOOST_TEST(std::accumulate(counts.begin(), counts.end(), int64_t{0}) == plan.segments[s]);
      // Row by row (in file order) the segments fit in 6 tokens: the rows are BFD's, in some order.
      std::vector<uint32_t> length_at(segments.size());
      for (std::size_t k = 0; k < segments.size(); ++k) length_at[plan.segment_position[s][k]] = lengths_of(segments)[k];
      uint32_t at = 0;
      for (uint32_t count : counts) {
        uint32_t tokens = 0;
        for (uint32_t k = 0; k < count; ++k) tokens += length_at[at++];
        BOOST_TEST((tokens >= 1 && tokens <= 6));
      }
    }
    // bfd cuts the documents longer than a row (9 and 7 tokens): counted per split.
    const int64_t cut = plan.truncated[0] + plan.truncated[1];
    BOOST_TEST(cut == (split_long ? 0 : 2));
  }
  // The same seed places the rows alike; another seed differently (enough rows to tell).
  LmPlan many = plan_documents({std::vector<uint8_t>(64, 1)}, 0.0, 5);
  std::vector<std::vector<uint32_t>> ones(1, std::vector<uint32_t>(64, 3));
  plan_document_rows(many, ones, 4, false, 1);
  const auto first = many.segment_position[0];
  plan_document_rows(many, ones, 4, false, 1);
  BOOST_TEST(many.segment_position[0] == first, boost::test_tools::per_element());
  plan_document_rows(many, ones, 4, false, 2);
  BOOST_TEST((many.segment_position[0] != first));
}

BOOST_AUTO_TEST_CASE(bfd_refuses_segments_that_do_not_fit) {
  BOOST_CHECK_THROW((void)best_fit_decreasing({3, 5}, 4), hpctrain::Error);
  BOOST_CHECK_THROW((void)best_fit_decreasing({0}, 4), hpctrain::Error);
  BOOST_TEST(best_fit_decreasing({}, 4).size() == 0u);
}

BOOST_AUTO_TEST_CASE(a_packed_row_flags_the_first_token_of_each_document) {
  hpctrain::data::TextExamples documents, rows;
  documents.append({1, 2, 3}, {}, -1, 7);
  documents.append({4}, {}, -1, 2);
  documents.append({5, 6}, {}, -1, 9);
  rows.append_packed(documents);
  rows.append_packed(documents);
  BOOST_TEST(rows.size() == 2);
  BOOST_TEST(rows.source_index[0] == 7);
  const std::vector<uint8_t> flags = {1, 0, 0, 1, 1, 0};
  BOOST_TEST(std::vector<uint8_t>(rows.document_start.begin(), rows.document_start.begin() + 6) == flags,
             boost::test_tools::per_element());
  BOOST_CHECK_NO_THROW(rows.check_consistent("rows"));
  rows.document_start[6] = 0;  // the second row no longer begins a document
  BOOST_CHECK_THROW(rows.check_consistent("rows"), hpctrain::Error);
}

BOOST_AUTO_TEST_CASE(rows_are_joined_from_segments_across_buckets) {
  hpctrain::data::TextExamples segments;
  for (int32_t k = 0; k < 6; ++k) segments.append(std::vector<int32_t>(static_cast<std::size_t>(k + 1), k), {}, -1, k);
  const std::vector<uint32_t> row_segments = {2, 3, 1};
  // One bucket, or buckets of 1, 2 and 4 segments: the same rows.
  for (int64_t per_bucket : {6, 1, 2, 4}) {
    RowJoiner joiner(row_segments);
    hpctrain::data::TextExamples rows;
    for (int64_t first = 0; first < segments.size(); first += per_bucket) {
      std::vector<int64_t> bucket;
      for (int64_t i = first; i < std::min<int64_t>(segments.size(), first + per_bucket); ++i) bucket.push_back(i);
      rows.append_all(joiner.join(hpctrain::data::gather(segments, bucket)));
    }
    BOOST_TEST(joiner.done());
    BOOST_TEST_REQUIRE(rows.size() == 3);
    BOOST_TEST(rows.length(0) == 1 + 2);
    BOOST_TEST(rows.length(1) == 3 + 4 + 5);
    BOOST_TEST(rows.source_index[1] == 2);
    BOOST_TEST(rows.document_start[3] == 1);  // row 1 starts with segment 2
    BOOST_TEST(rows.document_start[3 + 3] == 1);
    BOOST_TEST(rows.document_start[3 + 4] == 0);
  }
  const std::vector<uint32_t> one_row = {1};
  RowJoiner short_plan(one_row);
  BOOST_CHECK_THROW((void)short_plan.join(segments), hpctrain::Error);
}
