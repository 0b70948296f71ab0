#include "hpctrain/data/examples.hpp"

#include <algorithm>

#include "hpctrain/core/error.hpp"

namespace hpctrain::data {

// Note [Document boundaries]
// A causal-lm row packed from several whole documents (`prep lm --packing bfd`, bfd_split) carries one flag per
// token, document_start: 1 at the first token of each document, so token 0 of every row is 1. Training reads the
// flags as positions that restart at 0 in every document (loader::Batch::position_ids), attention that never
// crosses a boundary, and no label on a document's first token (Note [Causal-LM labels]). A row without flags (the
// other packings, older files) is one sequence, as before. The writer and the reader check both rules (flags 0/1,
// the first token of each row 1).

void TextExamples::append(const std::vector<int32_t>& ids, const std::vector<uint8_t>& type_ids, int64_t label,
                          int64_t source_row, const std::vector<uint8_t>& starts, const std::vector<uint8_t>& mask) {
  HPCTRAIN_CHECK(type_ids.empty() || type_ids.size() == ids.size(),
                 "example {}: {} token_type_ids for {} tokens", size(), type_ids.size(), ids.size());
  HPCTRAIN_CHECK(starts.empty() || starts.size() == ids.size(), "example {}: {} document_start flags for {} tokens",
                 size(), starts.size(), ids.size());
  HPCTRAIN_CHECK(size() == 0 || starts.empty() != has_document_starts(),
                 "example {}: document_start flags given for some examples only", size());
  HPCTRAIN_CHECK(mask.empty() ? loss_mask.empty() : (mask.size() == ids.size() && loss_mask.size() == input_ids.size()),
                 "example {}: {} loss_mask values for {} tokens (every example has a mask, or none)", size(),
                 mask.size(), ids.size());
  input_ids.insert(input_ids.end(), ids.begin(), ids.end());
  token_type_ids.insert(token_type_ids.end(), type_ids.begin(), type_ids.end());
  document_start.insert(document_start.end(), starts.begin(), starts.end());
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
  if (other.has_document_starts()) {
    document_start.insert(document_start.end(), other.document_start.begin() + begin,
                          other.document_start.begin() + end);
  }
  if (other.has_loss_mask()) loss_mask.insert(loss_mask.end(), other.loss_mask.begin() + begin, other.loss_mask.begin() + end);
  offsets.push_back(static_cast<int64_t>(input_ids.size()));
  labels.push_back(other.labels[i]);
  source_index.push_back(other.source_index[i]);
}

void TextExamples::append_all(const TextExamples& other) {
  HPCTRAIN_CHECK(size() == 0 || other.size() == 0 || has_token_type_ids() == other.has_token_type_ids(),
                 "append_all: token_type_ids present in one set of examples only");
  HPCTRAIN_CHECK(size() == 0 || other.size() == 0 || has_document_starts() == other.has_document_starts(),
                 "append_all: document_start present in one set of examples only");
  HPCTRAIN_CHECK(size() == 0 || other.size() == 0 || has_loss_mask() == other.has_loss_mask(),
                 "append_all: loss_mask present in one set of examples only");
  const int64_t shift = num_tokens();
  input_ids.insert(input_ids.end(), other.input_ids.begin(), other.input_ids.end());
  token_type_ids.insert(token_type_ids.end(), other.token_type_ids.begin(), other.token_type_ids.end());
  document_start.insert(document_start.end(), other.document_start.begin(), other.document_start.end());
  loss_mask.insert(loss_mask.end(), other.loss_mask.begin(), other.loss_mask.end());
  for (size_t i = 1; i < other.offsets.size(); ++i) offsets.push_back(other.offsets[i] + shift);
  labels.insert(labels.end(), other.labels.begin(), other.labels.end());
  source_index.insert(source_index.end(), other.source_index.begin(), other.source_index.end());
}

void TextExamples::append_packed(const TextExamples& documents) {
  HPCTRAIN_CHECK(documents.size() > 0, "append_packed: a row needs at least one document");
  HPCTRAIN_CHECK(size() == 0 || has_token_type_ids() == documents.has_token_type_ids(),
                 "append_packed: token_type_ids present in one set of examples only");
  HPCTRAIN_CHECK(size() == 0 || has_document_starts(), "append_packed: example {} has no document_start flags", size());
  HPCTRAIN_CHECK(size() == 0 || has_loss_mask() == documents.has_loss_mask(),
                 "append_packed: loss_mask present in one set of examples only");
  input_ids.insert(input_ids.end(), documents.input_ids.begin(), documents.input_ids.end());
  token_type_ids.insert(token_type_ids.end(), documents.token_type_ids.begin(), documents.token_type_ids.end());
  loss_mask.insert(loss_mask.end(), documents.loss_mask.begin(), documents.loss_mask.end());
  const std::size_t first = document_start.size();
  if (documents.has_document_starts()) {
    document_start.insert(document_start.end(), documents.document_start.begin(), documents.document_start.end());
  } else {
    document_start.resize(first + documents.input_ids.size(), 0);
  }
  for (int64_t i = 0; i < documents.size(); ++i) document_start[first + static_cast<size_t>(documents.offsets[i])] = 1;
  offsets.push_back(static_cast<int64_t>(input_ids.size()));
  labels.push_back(documents.labels[0]);
  source_index.push_back(documents.source_index[0]);
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
  if (!has_document_starts()) return;
  HPCTRAIN_CHECK(document_start.size() == input_ids.size(), "{}: {} document_start flags for {} tokens", what,
                 document_start.size(), input_ids.size());
  // Note [Document boundaries]
  for (int64_t i = 0; i < size(); ++i) {
    for (int64_t t = offsets[i]; t < offsets[i + 1]; ++t) {
      const uint8_t flag = document_start[static_cast<size_t>(t)];
      HPCTRAIN_CHECK(flag <= 1 && (t > offsets[i] || flag == 1),
                     "{}: example {}, token {}: document_start {}, expected {}", what, i, t - offsets[i], flag,
                     t == offsets[i] ? "1 (a row begins a document)" : "0 or 1");
    }
  }
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
