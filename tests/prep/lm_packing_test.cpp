// Note [Packing rows] and the plan of `prep lm`: pure functions, no files or processes.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <numeric>
#include <utility>
#include <vector>

#include "hpctrain/core/error.hpp"
#include "prep/lm_packing.hpp"

using namespace hpctrain::prep::detail;

namespace {

using Ids = std::vector<int32_t>;
using Rows = std::vector<std::pair<Ids, int64_t>>;  // (ids, source_index)

// Packs documents (ids, source row) into rows of `block_size`; `dropped`: the tokens left over.
Rows pack(const std::vector<std::pair<Ids, int64_t>>& documents, int64_t block_size, int64_t& dropped) {
  RowPacker packer(block_size);
  Rows rows;
  for (const auto& [ids, row] : documents)
    packer.add(ids.data(), ids.size(), row, [&](const Ids& packed, int64_t source) { rows.emplace_back(packed, source); });
  dropped = packer.pending();
  return rows;
}

std::vector<uint8_t> split_of(const LmPlan& plan) { return plan.documents.files[0].split; }

}  // namespace

BOOST_AUTO_TEST_CASE(eos_is_appended_unless_already_last) {
  Ids empty;
  end_with_eos(empty, 9);
  BOOST_TEST(empty == Ids({9}), boost::test_tools::per_element());
  Ids text = {1, 2};
  end_with_eos(text, 9);
  BOOST_TEST(text == Ids({1, 2, 9}), boost::test_tools::per_element());
  Ids ended = {1, 9};
  end_with_eos(ended, 9);
  BOOST_TEST(ended == Ids({1, 9}), boost::test_tools::per_element());
  Ids eos_inside = {9, 1};
  end_with_eos(eos_inside, 9);
  BOOST_TEST(eos_inside == Ids({9, 1, 9}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(rows_have_exactly_block_size_tokens_and_the_remainder_is_dropped) {
  int64_t dropped = 0;
  const Rows rows = pack({{{1, 2, 3}, 10}, {{4, 5, 6, 7, 8}, 11}, {{9}, 12}}, 4, dropped);
  BOOST_TEST_REQUIRE(rows.size() == 2u);
  BOOST_TEST(rows[0].first == Ids({1, 2, 3, 4}), boost::test_tools::per_element());
  BOOST_TEST(rows[1].first == Ids({5, 6, 7, 8}), boost::test_tools::per_element());
  BOOST_TEST(dropped == 1);  // token 9: run_clm's group_texts drops it too
}

BOOST_AUTO_TEST_CASE(a_row_names_the_document_of_its_first_token) {
  int64_t dropped = 0;
  // Row 0 starts in document 10, row 1 in document 11 (whose first token is row 0's last), row 2 in document 12.
  const Rows rows = pack({{{1, 2, 3}, 10}, {{4, 5, 6, 7, 8}, 11}, {{9, 10, 11, 12}, 12}}, 4, dropped);
  BOOST_TEST_REQUIRE(rows.size() == 3u);
  BOOST_TEST(rows[0].second == 10);
  BOOST_TEST(rows[1].second == 11);
  BOOST_TEST(rows[2].second == 12);
  BOOST_TEST(dropped == 0);
}

BOOST_AUTO_TEST_CASE(a_long_document_fills_several_rows) {
  int64_t dropped = 0;
  const Rows rows = pack({{{1, 2, 3, 4, 5, 6, 7, 8, 9}, 5}}, 4, dropped);
  BOOST_TEST_REQUIRE(rows.size() == 2u);
  BOOST_TEST(rows[0].second == 5);
  BOOST_TEST(rows[1].second == 5);
  BOOST_TEST(rows[1].first == Ids({5, 6, 7, 8}), boost::test_tools::per_element());
  BOOST_TEST(dropped == 1);
}

BOOST_AUTO_TEST_CASE(a_block_size_below_one_is_refused) {
  BOOST_CHECK_THROW(RowPacker(0), hpctrain::Error);
}

BOOST_AUTO_TEST_CASE(validation_fraction_splits_documents_with_the_seed) {
  std::vector<uint8_t> valid(200, 1);
  for (std::size_t row = 0; row < valid.size(); row += 7) valid[row] = 0;  // rejected rows
  const int64_t documents = std::count(valid.begin(), valid.end(), 1);
  const LmPlan plan = plan_documents({valid}, 0.25, 7);
  BOOST_TEST_REQUIRE(plan.documents.names.size() == 2u);
  BOOST_TEST(plan.documents.names[1] == "validation");
  BOOST_TEST(plan.documents.sizes[1] == std::llround(0.25 * static_cast<double>(documents)));
  BOOST_TEST(plan.documents.sizes[0] + plan.documents.sizes[1] == documents);
  for (std::size_t row = 0; row < valid.size(); ++row)
    BOOST_TEST((split_of(plan)[row] == kSkipped) == (valid[row] == 0), "row " << row);
  // The same seed gives the same split; another seed another one.
  BOOST_TEST(split_of(plan_documents({valid}, 0.25, 7)) == split_of(plan), boost::test_tools::per_element());
  BOOST_TEST((split_of(plan_documents({valid}, 0.25, 8)) != split_of(plan)));
}

BOOST_AUTO_TEST_CASE(a_validation_input_is_a_whole_split) {
  const LmPlan plan = plan_documents({{1, 1, 0, 1}, {1, 0, 1}}, 0.0, 1);
  BOOST_TEST_REQUIRE(plan.documents.names.size() == 2u);
  BOOST_TEST(plan.documents.names[1] == "validation");
  BOOST_TEST(plan.documents.sizes[0] == 3);
  BOOST_TEST(plan.documents.sizes[1] == 2);
  BOOST_TEST(plan.documents.files[1].split[1] == kSkipped);
}

BOOST_AUTO_TEST_CASE(packed_rows_are_counted_from_tokens_and_shuffled_once) {
  LmPlan plan = plan_documents({{1, 1, 1, 1}}, 0.5, 3);
  plan_rows(plan, {10, 7}, 3, 3);
  BOOST_TEST(plan.rows == std::vector<int64_t>({3, 2}), boost::test_tools::per_element());
  BOOST_TEST_REQUIRE(plan.row_position.size() == 2u);
  for (std::size_t s = 0; s < 2; ++s) {
    auto positions = plan.row_position[s];
    std::sort(positions.begin(), positions.end());
    std::vector<uint32_t> all(positions.size());
    std::iota(all.begin(), all.end(), 0u);
    BOOST_TEST(positions == all, boost::test_tools::per_element());  // a permutation
  }
  std::vector<uint32_t> order(1000);
  LmPlan large = plan_documents({{1}}, 0.0, 3);
  plan_rows(large, {3000}, 3, 3);
  std::iota(order.begin(), order.end(), 0u);
  BOOST_TEST((large.row_position[0] != order));  // shuffled
}

BOOST_AUTO_TEST_CASE(without_packing_a_row_is_a_document) {
  LmPlan plan = plan_documents({{1, 0, 1, 1}}, 0.0, 3);
  plan_rows(plan, {12}, 0, 3);
  BOOST_TEST(plan.rows == std::vector<int64_t>({3}), boost::test_tools::per_element());
  BOOST_TEST(plan.row_position.empty());
}
