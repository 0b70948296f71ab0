// libFuzzer target: DatasetReader on an arbitrary file opened as HDF5 (HDF5 itself is not instrumented).
// Every split present is described, fully validated, and read back by range and by indices; each step either
// throws Error or returns what the schema promises (sizes consistent with split_info).
#include "fuzz_util.hpp"
#include "hpctrain/data/dataset_reader.hpp"

#include <fmt/format.h>

#include <algorithm>

using hpctrain::data::DatasetReader;
using hpctrain::data::SplitInfo;
using hpctrain::data::Task;

namespace {

// Validation reads in bounded pieces; reading whole splits here could allocate without bound for a file that
// claims billions of (fill-value) examples, so reads stop at a few examples.
constexpr std::int64_t kMaxRead = 64;

void read_text_split(const DatasetReader& reader, const SplitInfo& info) {
  const std::int64_t end = std::min(info.num_examples, kMaxRead);
  const auto text = reader.read_text(info.name, 0, end);
  HPCTRAIN_FUZZ_ASSERT(text.size() == end, info.name);
  HPCTRAIN_FUZZ_ASSERT(reader.count_tokens(info.name, 0, end) == static_cast<std::int64_t>(text.input_ids.size()),
                       info.name);
  for (const std::int32_t id : text.input_ids) HPCTRAIN_FUZZ_ASSERT(id >= 0 && id < reader.vocab_size(), info.name);
  for (const std::int64_t label : text.labels) HPCTRAIN_FUZZ_ASSERT(label >= 0 && label < reader.num_labels(), info.name);
  if (end > 0) {
    const auto picked = reader.read_text_indices(info.name, {end - 1, 0, end - 1});
    HPCTRAIN_FUZZ_ASSERT(picked.size() == 3, info.name);
  }
}

void read_image_split(const DatasetReader& reader, const SplitInfo& info) {
  const std::int64_t end = std::min(info.num_examples, kMaxRead);
  const auto images = reader.read_images(info.name, 0, end);
  HPCTRAIN_FUZZ_ASSERT(images.size() == end, info.name);
  for (const std::int64_t label : images.labels) HPCTRAIN_FUZZ_ASSERT(label >= 0 && label < reader.num_labels(), info.name);
  if (end > 0) (void)reader.read_image_indices(info.name, {end - 1, 0});
}

void exercise(const std::filesystem::path& path) {
  const DatasetReader reader(path);
  HPCTRAIN_FUZZ_ASSERT(reader.num_labels() > 0, "accepted a file without labels");
  (void)reader.has_split("bogus");
  for (const std::string& split : reader.splits()) {
    hpctrain::fuzz::expect_errors([&] {
      const SplitInfo info = reader.split_info(split);
      HPCTRAIN_FUZZ_ASSERT(info.num_examples >= 0, split);
      reader.validate_split(split);
      (void)reader.read_labels(split, 0, std::min(info.num_examples, kMaxRead));
      (void)reader.read_source_index(split, 0, std::min(info.num_examples, kMaxRead));
      if (reader.task() == Task::text_classification) {
        read_text_split(reader, info);
      } else {
        read_image_split(reader, info);
      }
    });
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const hpctrain::fuzz::TempFile file("dataset.h5");
  file.write(data, size);
  hpctrain::fuzz::expect_errors([&] { exercise(file.path()); });
  return 0;
}
