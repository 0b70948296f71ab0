#include "hpctrain/loader/batch.hpp"

#include <algorithm>

#include "hpctrain/core/error.hpp"

namespace hpctrain::loader {
namespace {

void fill_positions(Batch& batch, const std::vector<int64_t>& labels, const std::vector<data::SamplePosition>& positions) {
  const auto size = static_cast<int64_t>(positions.size());
  batch.labels = torch::empty({size}, torch::kLong);
  batch.example_index = torch::empty({size}, torch::kLong);
  batch.is_padding = torch::empty({size}, torch::kBool);
  auto* label = batch.labels.data_ptr<int64_t>();
  auto* index = batch.example_index.data_ptr<int64_t>();
  auto* padding = batch.is_padding.data_ptr<bool>();
  for (int64_t i = 0; i < size; ++i) {
    label[i] = labels[i];
    index[i] = positions[i].example;
    padding[i] = positions[i].is_padding;
  }
}

// Each token's place in its document (Note [Document boundaries]); padding goes on counting from the last
// document, so that it joins that document's run (Note [Packed attention] in src/models/attention.cpp).
void fill_document_positions(const uint8_t* starts, int64_t count, int64_t* out, int64_t length) {
  int64_t place = 0;
  for (int64_t t = 0; t < length; ++t) {
    place = t < count && starts[t] != 0 ? 0 : place + 1;
    out[t] = place;
  }
}

}  // namespace

Batch collate_text(const data::TextExamples& examples, const std::vector<data::SamplePosition>& positions,
                   const CollateOptions& options) {
  HPCTRAIN_CHECK(examples.size() == static_cast<int64_t>(positions.size()),
                 "collate_text: {} examples for {} positions", examples.size(), positions.size());
  HPCTRAIN_CHECK(options.pad_to_multiple_of >= 1, "pad_to_multiple_of {}: expected >= 1", options.pad_to_multiple_of);
  const int64_t size = examples.size();
  int64_t longest = 0;
  for (int64_t i = 0; i < size; ++i) longest = std::max(longest, examples.length(i));
  const int64_t multiple = options.pad_to_multiple_of;
  const int64_t length = (longest + multiple - 1) / multiple * multiple;

  Batch batch;
  batch.input_ids = torch::full({size, length}, options.pad_token_id, torch::kLong);
  batch.attention_mask = torch::zeros({size, length}, torch::kLong);
  batch.token_type_ids = torch::zeros({size, length}, torch::kLong);
  auto* ids = batch.input_ids.data_ptr<int64_t>();
  auto* mask = batch.attention_mask.data_ptr<int64_t>();
  auto* types = batch.token_type_ids.data_ptr<int64_t>();
  int64_t* targets = nullptr;
  if (examples.has_loss_mask()) {
    batch.loss_mask = torch::zeros({size, length}, torch::kLong);
    targets = batch.loss_mask.data_ptr<int64_t>();
  }
  int64_t* places = nullptr;
  if (examples.has_document_starts()) {
    batch.position_ids = torch::zeros({size, length}, torch::kLong);
    places = batch.position_ids.data_ptr<int64_t>();
  }
  for (int64_t i = 0; i < size; ++i) {
    const int64_t first = examples.offsets[i], count = examples.length(i);
    for (int64_t t = 0; t < count; ++t) {
      ids[i * length + t] = examples.input_ids[first + t];
      mask[i * length + t] = 1;
      if (examples.has_token_type_ids()) types[i * length + t] = examples.token_type_ids[first + t];
      if (targets != nullptr) targets[i * length + t] = examples.loss_mask[first + t];
    }
    if (places != nullptr) fill_document_positions(examples.document_start.data() + first, count, places + i * length, length);
  }
  fill_positions(batch, examples.labels, positions);
  return batch;
}

Batch collate_images(const data::ImageExamples& examples, const std::vector<data::SamplePosition>& positions,
                     const std::vector<double>& mean, const std::vector<double>& stddev) {
  HPCTRAIN_CHECK(examples.size() == static_cast<int64_t>(positions.size()),
                 "collate_images: {} images for {} positions", examples.size(), positions.size());
  const int64_t channels = examples.channels, plane = examples.height * examples.width;
  HPCTRAIN_CHECK(static_cast<int64_t>(mean.size()) == channels && static_cast<int64_t>(stddev.size()) == channels,
                 "collate_images: {} mean and {} std values for {} channels", mean.size(), stddev.size(), channels);
  // (x/255 - mean) / std as one multiply-add per pixel.
  std::vector<float> scale(channels), shift(channels);
  for (int64_t c = 0; c < channels; ++c) {
    const double deviation = stddev[c] > 0.0 ? stddev[c] : 1.0;
    scale[c] = static_cast<float>(1.0 / (255.0 * deviation));
    shift[c] = static_cast<float>(-mean[c] / deviation);
  }
  Batch batch;
  batch.pixel_values = torch::empty({examples.size(), channels, examples.height, examples.width}, torch::kFloat);
  float* out = batch.pixel_values.data_ptr<float>();
  const uint8_t* in = examples.pixels.data();
  for (int64_t image = 0; image < examples.size(); ++image) {
    for (int64_t c = 0; c < channels; ++c) {
      const int64_t base = (image * channels + c) * plane;
      for (int64_t p = 0; p < plane; ++p) out[base + p] = static_cast<float>(in[base + p]) * scale[c] + shift[c];
    }
  }
  fill_positions(batch, examples.labels, positions);
  return batch;
}

Batch pin_memory(Batch batch) {
  for (torch::Tensor* tensor : {&batch.input_ids, &batch.attention_mask, &batch.token_type_ids, &batch.loss_mask,
                                &batch.position_ids, &batch.pixel_values, &batch.labels, &batch.example_index, &batch.is_padding})
    if (tensor->defined()) *tensor = tensor->pin_memory();
  return batch;
}

}  // namespace hpctrain::loader
