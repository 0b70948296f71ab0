#include "example_store.hpp"

#include <algorithm>

#include "hpctrain/core/error.hpp"

namespace hpctrain::loader {
namespace {

struct Range {
  int64_t begin = 0, end = 0;
};

std::vector<Range> contiguous_runs(const std::vector<int64_t>& sorted) {
  std::vector<Range> runs;
  for (int64_t example : sorted) {
    if (!runs.empty() && runs.back().end == example) {
      ++runs.back().end;
    } else {
      runs.push_back({example, example + 1});
    }
  }
  return runs;
}

void check_sorted(const std::vector<int64_t>& examples) {
  for (size_t i = 1; i < examples.size(); ++i) {
    HPCTRAIN_CHECK(examples[i] > examples[i - 1], "ExampleStore: examples must be sorted and distinct");
  }
}

}  // namespace

ExampleStore ExampleStore::load_runs(const data::DatasetReader& reader, const std::string& split,
                                     std::vector<int64_t> examples) {
  check_sorted(examples);
  ExampleStore store;
  const bool is_text = data::is_text_task(reader.task());
  // The first run is moved in, not copied: a resident shard is usually one run, and copying it would
  // need twice its memory for a moment.
  for (const Range& run : contiguous_runs(examples)) {
    if (is_text) {
      data::TextExamples piece = reader.read_text(split, run.begin, run.end);
      if (store.text_.size() == 0) {
        store.text_ = std::move(piece);
      } else {
        store.text_.append_all(piece);
      }
    } else {
      data::ImageExamples piece = reader.read_images(split, run.begin, run.end);
      if (store.images_.size() == 0) {
        store.images_ = std::move(piece);
      } else {
        store.images_.append_all(piece);
      }
    }
  }
  store.examples_ = std::move(examples);
  return store;
}

ExampleStore ExampleStore::load_scattered(const data::DatasetReader& reader, const std::string& split,
                                          std::vector<int64_t> examples) {
  check_sorted(examples);
  ExampleStore store;
  if (data::is_text_task(reader.task())) {
    store.text_ = reader.read_text_indices(split, examples);
  } else {
    store.images_ = reader.read_image_indices(split, examples);
  }
  store.examples_ = std::move(examples);
  return store;
}

bool ExampleStore::contains(int64_t example) const {
  return std::binary_search(examples_.begin(), examples_.end(), example);
}

int64_t ExampleStore::row(int64_t example) const {
  const auto found = std::lower_bound(examples_.begin(), examples_.end(), example);
  HPCTRAIN_CHECK(found != examples_.end() && *found == example, "ExampleStore: example {} is not loaded", example);
  return found - examples_.begin();
}

void ExampleStore::append_to(data::TextExamples& out, int64_t example) const { out.append_from(text_, row(example)); }

void ExampleStore::append_to(data::ImageExamples& out, int64_t example) const {
  out.append_from(images_, row(example));
}

int64_t estimate_bytes(const data::DatasetReader& reader, const std::string& split, int64_t begin, int64_t end) {
  constexpr int64_t kPerExample = 3 * sizeof(int64_t);  // offset, label, source_index
  if (end <= begin) return 0;
  const data::SplitInfo info = reader.split_info(split);
  if (reader.task() == data::Task::image_classification) {
    return (end - begin) * (info.channels * info.height * info.width + kPerExample);
  }
  const int64_t bytes_per_token = sizeof(int32_t) + (info.has_token_type_ids ? 1 : 0) +
                                  (info.has_document_starts ? 1 : 0) + (info.has_loss_mask ? 1 : 0);
  return reader.count_tokens(split, begin, end) * bytes_per_token + (end - begin) * kPerExample;
}

}  // namespace hpctrain::loader
