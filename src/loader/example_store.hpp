// Private: examples held in memory, looked up by their index in the split. The loader keeps one for
// the resident shard (or split), one per streamed block, or one per batch read by index.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hpctrain/data/dataset_reader.hpp"
#include "hpctrain/data/examples.hpp"

namespace hpctrain::loader {

class ExampleStore {
 public:
  ExampleStore() = default;
  // `examples`: sorted and distinct. load_runs reads each maximal contiguous run as one hyperslab (a shard
  // or block is one or two runs); load_scattered lets the reader group nearby indices (global mode).
  [[nodiscard]] static ExampleStore load_runs(const data::DatasetReader& reader, const std::string& split,
                                              std::vector<int64_t> examples);
  [[nodiscard]] static ExampleStore load_scattered(const data::DatasetReader& reader, const std::string& split,
                                                   std::vector<int64_t> examples);

  [[nodiscard]] int64_t size() const { return static_cast<int64_t>(examples_.size()); }
  [[nodiscard]] bool contains(int64_t example) const;
  // Appends `example` (which must be held) to `out`.
  void append_to(data::TextExamples& out, int64_t example) const;
  void append_to(data::ImageExamples& out, int64_t example) const;

 private:
  [[nodiscard]] int64_t row(int64_t example) const;

  std::vector<int64_t> examples_;  // sorted, distinct; row i holds examples_[i]
  data::TextExamples text_;
  data::ImageExamples images_;
};

// Memory the examples [begin, end) of a split take once loaded, in bytes (estimate from the token count).
[[nodiscard]] int64_t estimate_bytes(const data::DatasetReader& reader, const std::string& split, int64_t begin,
                                     int64_t end);

}  // namespace hpctrain::loader
