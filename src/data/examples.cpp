#include "hpctrain/data/examples.hpp"

#include <algorithm>

#include "hpctrain/core/error.hpp"

namespace hpctrain::data {

void TextExamples::append(const std::vector<int32_t>& ids, const std::vector<uint8_t>& type_ids, int64_t label,
                          int64_t source_row, const std::vector<uint8_t>& mask) {
  HPCTRAIN_CHECK(type_ids.empty() || type_ids.size() == ids.size(),
                 "example {}: {} token_type_ids for {} tokens", size(), type_ids.size(), ids.size());
  HPCTRAIN_CHECK(mask.empty() ? loss_mask.empty() : (mask.size() == ids.size() && loss_mask.size() == input_ids.size()),
                 "example {}: {} loss_mask values for {} tokens (every example has a mask, or none)", size(),
                 mask.size(), ids.size());
  input_ids.insert(input_ids.end(), ids.begin(), ids.end());
  token_type_ids.insert(token_type_ids.end(), type_ids.begin(), type_ids.end());
  loss_mask.insert(loss_mask.end(), mask.begin(), mask.end());
  offsets.push_back(static_cast<int64_t>(input_ids.size()));
  labels.push_back(label);
  source_index.push_back(source_row);
}

void TextExamples::append_from(const TextExamples& other, int64_t i) {
  const auto begin = other.offsets[i], end = other.offsets[i + 1];
  input_ids.insert(input_ids.end(), other.input_ids.begin() + begin, other.input_ids.begin() + end);
  if (other.has_token_type_ids()) {
    token_type_ids.insert(token_type_ids.end(), other.token_type_ids.begin() + begin,
                          other.token_type_ids.begin() + end);
  }
  if (other.has_loss_mask()) loss_mask.insert(loss_mask.end(), other.loss_mask.begin() + begin, other.loss_mask.begin() + end);
  offsets.push_back(static_cast<int64_t>(input_ids.size()));
  labels.push_back(other.labels[i]);
  source_index.push_back(other.source_index[i]);
}

void TextExamples::append_all(const TextExamples& other) {
  HPCTRAIN_CHECK(size() == 0 || other.size() == 0 || has_token_type_ids() == other.has_token_type_ids(),
                 "append_all: token_type_ids present in one set of examples only");
  HPCTRAIN_CHECK(size() == 0 || other.size() == 0 || has_loss_mask() == other.has_loss_mask(),
                 "append_all: loss_mask present in one set of examples only");
  const int64_t shift = num_tokens();
  input_ids.insert(input_ids.end(), other.input_ids.begin(), other.input_ids.end());
  token_type_ids.insert(token_type_ids.end(), other.token_type_ids.begin(), other.token_type_ids.end());
  loss_mask.insert(loss_mask.end(), other.loss_mask.begin(), other.loss_mask.end());
  for (size_t i = 1; i < other.offsets.size(); ++i) offsets.push_back(other.offsets[i] + shift);
  labels.insert(labels.end(), other.labels.begin(), other.labels.end());
  source_index.insert(source_index.end(), other.source_index.begin(), other.source_index.end());
}

void TextExamples::check_consistent(const char* what) const {
  HPCTRAIN_CHECK(!offsets.empty() && offsets[0] == 0, "{}: offsets[0] must be 0, got {}", what,
                 offsets.empty() ? std::string("no offsets") : std::to_string(offsets[0]));
  for (size_t i = 1; i < offsets.size(); ++i) {
    HPCTRAIN_CHECK(offsets[i] >= offsets[i - 1], "{}: offsets[{}] = {} < offsets[{}] = {}: expected non-decreasing",
                   what, i, offsets[i], i - 1, offsets[i - 1]);
  }
  HPCTRAIN_CHECK(offsets.back() == static_cast<int64_t>(input_ids.size()),
                 "{}: offsets[{}] = {}, expected the number of tokens {}", what, offsets.size() - 1, offsets.back(),
                 input_ids.size());
  HPCTRAIN_CHECK(static_cast<int64_t>(labels.size()) == size() && static_cast<int64_t>(source_index.size()) == size(),
                 "{}: {} examples but {} labels and {} source_index", what, size(), labels.size(), source_index.size());
  HPCTRAIN_CHECK(token_type_ids.empty() || token_type_ids.size() == input_ids.size(),
                 "{}: {} token_type_ids for {} tokens", what, token_type_ids.size(), input_ids.size());
  HPCTRAIN_CHECK(loss_mask.empty() || loss_mask.size() == input_ids.size(), "{}: {} loss_mask values for {} tokens",
                 what, loss_mask.size(), input_ids.size());
}

void ImageExamples::append(const uint8_t* image_pixels, int64_t label, int64_t source_row) {
  pixels.insert(pixels.end(), image_pixels, image_pixels + image_bytes());
  labels.push_back(label);
  source_index.push_back(source_row);
}

void ImageExamples::append_from(const ImageExamples& other, int64_t i) {
  append(other.image(i), other.labels[i], other.source_index[i]);
}

void ImageExamples::append_all(const ImageExamples& other) {
  HPCTRAIN_CHECK(other.size() == 0 || other.image_bytes() == image_bytes(),
                 "append_all: images of {}x{}x{} appended to images of {}x{}x{}", other.channels, other.height,
                 other.width, channels, height, width);
  pixels.insert(pixels.end(), other.pixels.begin(), other.pixels.end());
  labels.insert(labels.end(), other.labels.begin(), other.labels.end());
  source_index.insert(source_index.end(), other.source_index.begin(), other.source_index.end());
}

void ImageExamples::check_consistent(const char* what) const {
  HPCTRAIN_CHECK(channels > 0 && height > 0 && width > 0, "{}: image shape [{}, {}, {}] must be positive", what,
                 channels, height, width);
  HPCTRAIN_CHECK(static_cast<int64_t>(pixels.size()) == size() * image_bytes(),
                 "{}: {} pixel bytes for {} images of {}x{}x{}, expected {}", what, pixels.size(), size(), channels,
                 height, width, size() * image_bytes());
  HPCTRAIN_CHECK(static_cast<int64_t>(source_index.size()) == size(), "{}: {} labels but {} source_index", what,
                 size(), source_index.size());
}

TextExamples gather(const TextExamples& examples, const std::vector<int64_t>& rows) {
  TextExamples out;
  out.offsets.reserve(rows.size() + 1);
  out.labels.reserve(rows.size());
  out.source_index.reserve(rows.size());
  for (int64_t row : rows) out.append_from(examples, row);
  return out;
}

ImageExamples gather(const ImageExamples& examples, const std::vector<int64_t>& rows) {
  ImageExamples out;
  out.channels = examples.channels;
  out.height = examples.height;
  out.width = examples.width;
  out.pixels.reserve(rows.size() * examples.image_bytes());
  for (int64_t row : rows) out.append_from(examples, row);
  return out;
}

}  // namespace hpctrain::data
