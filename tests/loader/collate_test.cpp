// Collation: padding, masks, segment ids, image normalization, and the per-example bookkeeping tensors.
#include <boost/test/unit_test.hpp>

#include "hpctrain/core/error.hpp"
#include "hpctrain/loader/batch.hpp"

using namespace hpctrain;

namespace {

data::TextExamples three_examples(bool pairs) {
  data::TextExamples text;
  auto types = [&](std::vector<uint8_t> t) { return pairs ? t : std::vector<uint8_t>{}; };
  text.append({101, 7, 102}, types({0, 0, 0}), 2, 10);
  text.append({101, 8, 9, 10, 102}, types({0, 0, 1, 1, 1}), 0, 11);
  text.append({101, 102}, types({0, 1}), 1, 12);
  return text;
}

const std::vector<data::SamplePosition> kPositions = {{40, false, 0}, {3, false, 0}, {40, true, 0}};

}  // namespace

BOOST_AUTO_TEST_SUITE(collate)

BOOST_AUTO_TEST_CASE(text_pads_to_the_longest_example) {
  const loader::Batch batch = loader::collate_text(three_examples(true), kPositions, {1, 0});
  BOOST_CHECK_EQUAL(batch.size(), 3);
  BOOST_CHECK(batch.input_ids.sizes() == torch::IntArrayRef({3, 5}));
  BOOST_CHECK(batch.input_ids.scalar_type() == torch::kLong);
  const auto expected_ids = torch::tensor({101, 7, 102, 0, 0, 101, 8, 9, 10, 102, 101, 102, 0, 0, 0}, torch::kLong).view({3, 5});
  const auto expected_mask = torch::tensor({1, 1, 1, 0, 0, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0}, torch::kLong).view({3, 5});
  const auto expected_types = torch::tensor({0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 0, 1, 0, 0, 0}, torch::kLong).view({3, 5});
  BOOST_CHECK(torch::equal(batch.input_ids, expected_ids));
  BOOST_CHECK(torch::equal(batch.attention_mask, expected_mask));
  BOOST_CHECK(torch::equal(batch.token_type_ids, expected_types));
  BOOST_CHECK(torch::equal(batch.labels, torch::tensor({2, 0, 1}, torch::kLong)));
  BOOST_CHECK(torch::equal(batch.example_index, torch::tensor({40, 3, 40}, torch::kLong)));
  BOOST_CHECK(torch::equal(batch.is_padding, torch::tensor({false, false, true})));
  BOOST_CHECK(!batch.pixel_values.defined());
}

BOOST_AUTO_TEST_CASE(text_pad_id_and_multiple) {
  const loader::Batch batch = loader::collate_text(three_examples(false), kPositions, {8, 5});
  BOOST_CHECK(batch.input_ids.sizes() == torch::IntArrayRef({3, 8}));
  BOOST_CHECK_EQUAL(batch.input_ids[0][3].item<int64_t>(), 5);
  BOOST_CHECK_EQUAL(batch.input_ids[1][7].item<int64_t>(), 5);
  BOOST_CHECK_EQUAL(batch.attention_mask.sum().item<int64_t>(), 10);  // 3 + 5 + 2 tokens
  BOOST_CHECK_EQUAL(batch.token_type_ids.abs().sum().item<int64_t>(), 0);  // single sentences: zeros
  const loader::Batch exact = loader::collate_text(three_examples(false), kPositions, {5, 0});
  BOOST_CHECK_EQUAL(exact.input_ids.size(1), 5);  // already a multiple
}

// Note [Document boundaries]: rows packed from documents get positions that restart at every document, as
// transformers' DataCollatorWithFlattening (padding counts on from the last document); rows without boundaries get
// none.
BOOST_AUTO_TEST_CASE(packed_rows_get_positions_per_document) {
  data::TextExamples rows;
  rows.append({5, 6, 7, 8, 9}, {}, -1, 0, {1, 0, 1, 0, 0});
  rows.append({3, 4}, {}, -1, 1, {1, 1});
  const loader::Batch batch = loader::collate_text(rows, {{0, false, 0}, {1, false, 0}}, {1, 0});
  BOOST_REQUIRE(batch.position_ids.defined());
  const auto expected = torch::tensor({0, 1, 0, 1, 2, 0, 0, 1, 2, 3}, torch::kLong).view({2, 5});
  BOOST_CHECK(torch::equal(batch.position_ids, expected));
  BOOST_CHECK(!loader::collate_text(three_examples(false), kPositions, {1, 0}).position_ids.defined());
}

BOOST_AUTO_TEST_CASE(text_size_mismatch_is_an_error) {
  BOOST_CHECK_THROW((void)loader::collate_text(three_examples(false), {{0, false, 0}}, {}), Error);
}

BOOST_AUTO_TEST_CASE(images_are_normalized_with_stored_statistics) {
  data::ImageExamples images;
  images.channels = 2;
  images.height = 1;
  images.width = 3;
  const uint8_t first[] = {0, 128, 255, 10, 20, 30};
  const uint8_t second[] = {255, 255, 255, 7, 7, 7};
  images.append(first, 4, 0);
  images.append(second, 9, 1);
  const std::vector<double> mean = {0.5, 0.25}, stddev = {0.2, 0.0};  // channel 1: constant, divide by 1
  const loader::Batch batch = loader::collate_images(images, {{5, false, 0}, {6, false, 0}}, mean, stddev);
  BOOST_CHECK(batch.pixel_values.sizes() == torch::IntArrayRef({2, 2, 1, 3}));
  BOOST_CHECK(batch.pixel_values.scalar_type() == torch::kFloat);
  auto values = batch.pixel_values.contiguous();
  const float* v = values.data_ptr<float>();
  const uint8_t* raw[] = {first, second};
  for (int image = 0; image < 2; ++image) {
    for (int c = 0; c < 2; ++c) {
      for (int p = 0; p < 3; ++p) {
        const double x = raw[image][c * 3 + p] / 255.0;
        const double expected = (x - mean[c]) / (stddev[c] > 0 ? stddev[c] : 1.0);
        BOOST_CHECK_SMALL(v[(image * 2 + c) * 3 + p] - expected, 1e-5);
      }
    }
  }
  BOOST_CHECK(torch::equal(batch.labels, torch::tensor({4, 9}, torch::kLong)));
  BOOST_CHECK(!batch.input_ids.defined());
}

BOOST_AUTO_TEST_SUITE_END()
