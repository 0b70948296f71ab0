// Test helpers shared by tests/data and tests/loader: temporary directories, synthetic examples,
// dataset files written through DatasetWriter, and raw files crafted with the private HDF5 layer
// (data/h5_handle.hpp) to exercise the reader's checks on corrupt input.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <string>
#include <vector>

#include "data/h5_handle.hpp"
#include "hpctrain/core/error.hpp"
#include "hpctrain/core/random.hpp"
#include "hpctrain/data/dataset_reader.hpp"
#include "hpctrain/data/dataset_writer.hpp"

namespace hpctrain::testing {

namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "hpctrain-test-XXXXXX").string();
    HPCTRAIN_CHECK(::mkdtemp(pattern.data()) != nullptr, "mkdtemp failed for {}", pattern);
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  [[nodiscard]] const fs::path& path() const { return path_; }
  [[nodiscard]] fs::path file(const std::string& name) const { return path_ / name; }

 private:
  fs::path path_;
};

inline constexpr int32_t kCls = 101, kSep = 102;

// n examples of [CLS] ids... [SEP], lengths in [min_length, max_length], ids in [0, vocab_size).
inline data::TextExamples make_text(int64_t n, uint64_t seed, bool pairs, int64_t vocab_size = 1000, int64_t num_labels = 3,
                                    int64_t min_length = 3, int64_t max_length = 20) {
  SplitMix64 rng(seed);
  data::TextExamples text;
  for (int64_t i = 0; i < n; ++i) {
    const auto length = min_length + static_cast<int64_t>(rng.below(static_cast<uint64_t>(max_length - min_length + 1)));
    std::vector<int32_t> ids(static_cast<size_t>(length));
    std::vector<uint8_t> types;
    for (int64_t t = 0; t < length; ++t) ids[t] = static_cast<int32_t>(rng.below(static_cast<uint64_t>(vocab_size)));
    ids.front() = kCls;
    ids.back() = kSep;
    if (pairs) {
      types.assign(ids.size(), 0);
      for (int64_t t = length / 2; t < length; ++t) types[t] = 1;
    }
    text.append(ids, types, static_cast<int64_t>(rng.below(static_cast<uint64_t>(num_labels))), 1000 + i);
  }
  return text;
}

inline data::ImageExamples make_images(int64_t n, int64_t channels, int64_t height, int64_t width, uint64_t seed,
                                       int64_t num_labels = 10) {
  SplitMix64 rng(seed);
  data::ImageExamples images;
  images.channels = channels;
  images.height = height;
  images.width = width;
  std::vector<uint8_t> image(static_cast<size_t>(channels * height * width));
  for (int64_t i = 0; i < n; ++i) {
    for (auto& pixel : image) pixel = static_cast<uint8_t>(rng.below(256));
    images.append(image.data(), static_cast<int64_t>(rng.below(static_cast<uint64_t>(num_labels))), i);
  }
  return images;
}

inline data::FileAttributes text_attributes(int64_t num_labels = 3, int64_t vocab_size = 1000) {
  data::FileAttributes attributes;
  attributes.task = data::Task::text_classification;
  for (int64_t i = 0; i < num_labels; ++i) attributes.label_names.push_back("label_" + std::to_string(i));
  attributes.source = "synthetic.jsonl";
  attributes.created_by = "hpctrain tests";
  attributes.tokenizer = {{"vocab_size", vocab_size}, {"do_lower_case", true}, {"max_length", 128},
                          {"vocab_sha256", "0123abcd"}};
  return attributes;
}

inline data::FileAttributes image_attributes(int64_t num_labels = 10) {
  data::FileAttributes attributes;
  attributes.task = data::Task::image_classification;
  for (int64_t i = 0; i < num_labels; ++i) attributes.label_names.push_back(std::to_string(i));
  attributes.source = "synthetic-idx";
  attributes.created_by = "hpctrain tests";
  return attributes;
}

inline fs::path write_text_file(const fs::path& path, const data::TextExamples& train, bool pairs,
                                data::Compression compression = data::Compression::gzip,
                                const data::TextExamples* validation = nullptr) {
  data::DatasetWriter writer(path, text_attributes(), data::WriterOptions{compression, 4}, /*overwrite=*/true);
  writer.write_text_split("train", train, pairs);
  if (validation) writer.write_text_split("validation", *validation, pairs);
  writer.commit();
  return path;
}

inline fs::path write_image_file(const fs::path& path, const data::ImageExamples& train,
                                 data::Compression compression = data::Compression::gzip) {
  data::DatasetWriter writer(path, image_attributes(), data::WriterOptions{compression, 4}, /*overwrite=*/true);
  writer.write_image_split("train", train);
  writer.commit();
  return path;
}

// FNV-1a over an example's token ids: compares what a loader yields with what was written.
inline uint64_t token_checksum(const int32_t* ids, int64_t count) {
  uint64_t hash = 0xcbf29ce484222325ull;
  for (int64_t i = 0; i < count; ++i) {
    hash ^= static_cast<uint32_t>(ids[i]);
    hash *= 0x100000001b3ull;
  }
  return hash;
}

// ---- corrupting files ----

// Overwrites element `index` of /<split>/<dataset> in place.
template <typename T>
void overwrite_element(const fs::path& path, const std::string& split, const std::string& dataset, int64_t index, T value) {
  data::h5::Handle file = data::h5::open_file_for_update(path);
  data::h5::Handle group = data::h5::open_group(file.get(), split);
  data::h5::Handle handle = data::h5::open_dataset(group.get(), dataset);
  data::h5::write_rows(handle.get(), data::h5::type_of<T>(), index, index + 1, 1, &value);
}

inline void overwrite_int64_attribute(const fs::path& path, const std::string& object, const std::string& name,
                                      int64_t value) {
  data::h5::Handle file = data::h5::open_file_for_update(path);
  if (object == "/") {
    data::h5::write_int64_attribute(file.get(), name, value);
  } else {
    data::h5::Handle group = data::h5::open_group(file.get(), object);
    data::h5::write_int64_attribute(group.get(), name, value);
  }
}

// One dataset of a raw file; values are converted to `type` when written.
struct RawDataset {
  std::string name;
  data::h5::Type type = data::h5::Type::i64;
  std::vector<int64_t> values;
};

// A text file whose split datasets are exactly `datasets` (any types and lengths), for structural errors.
inline void write_raw_text_file(const fs::path& path, int64_t num_examples, const std::vector<RawDataset>& datasets) {
  data::h5::Handle file = data::h5::create_file(path);
  const data::FileAttributes attributes = text_attributes();
  data::h5::write_int64_attribute(file.get(), data::schema::kAttrFormat, 1);
  data::h5::write_string_attribute(file.get(), data::schema::kAttrTask, "text-classification");
  data::h5::write_string_attribute(file.get(), data::schema::kAttrLabelNames, nlohmann::json(attributes.label_names).dump());
  data::h5::write_string_attribute(file.get(), data::schema::kAttrSource, attributes.source);
  data::h5::write_string_attribute(file.get(), data::schema::kAttrCreatedBy, attributes.created_by);
  data::h5::write_string_attribute(file.get(), data::schema::kAttrTokenizer, attributes.tokenizer.dump());
  data::h5::Handle group = data::h5::create_group(file.get(), "train");
  data::h5::write_int64_attribute(group.get(), data::schema::kAttrNumExamples, num_examples);
  for (const RawDataset& raw : datasets) {
    data::h5::Handle dataset = data::h5::create_rows_dataset(group.get(), raw.name, raw.type, data::h5::Layout{{}, 1024});
    std::vector<uint8_t> u8(raw.values.begin(), raw.values.end());
    std::vector<int32_t> i32(raw.values.begin(), raw.values.end());
    std::vector<double> f64(raw.values.begin(), raw.values.end());
    const void* data = raw.type == data::h5::Type::u8    ? static_cast<const void*>(u8.data())
                       : raw.type == data::h5::Type::i32 ? static_cast<const void*>(i32.data())
                       : raw.type == data::h5::Type::f64 ? static_cast<const void*>(f64.data())
                                                         : static_cast<const void*>(raw.values.data());
    data::h5::append_rows(dataset.get(), raw.type, data, static_cast<int64_t>(raw.values.size()), 1);
  }
  data::h5::close_file(file);
}

// The message of the Error `action` throws ("" when it does not throw).
template <typename Action>
std::string error_of(Action&& action) {
  try {
    action();
  } catch (const Error& error) {
    return error.what();
  }
  return "";
}

}  // namespace hpctrain::testing
