// Reads and validates an HDF5 dataset file (schema version 1, docs/hdf5-format.md).
// The file is treated as hostile: every read checks what it returns (offsets monotone and inside the
// token array, token ids below the tokenizer's vocab_size, labels inside [0, num_labels), segment ids
// 0/1), and errors name the file, dataset and index with expected and actual values.
// Reads are hyperslabs of the requested examples only; nothing reads the whole file unless asked.
// Thread-compatible: const methods may be called from any one thread at a time per reader (HDF5 itself
// is built thread-safe and serialises calls).
#pragma once

#include <nlohmann/json.hpp>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "hpctrain/data/dataset_schema.hpp"
#include "hpctrain/data/examples.hpp"

namespace hpctrain::data {

struct SplitInfo {
  std::string name;
  int64_t num_examples = 0;
  int64_t num_tokens = 0;                 // text: length of input_ids
  bool has_token_type_ids = false;
  bool has_document_starts = false;       // causal-lm rows packed by documents (document_start)
  bool has_loss_mask = false;             // causal-lm from prep sft (Note [Loss mask] in examples.hpp)
  int64_t channels = 0, height = 0, width = 0;  // images
  std::vector<double> mean, std;          // images: per channel, of pixel/255
};

class DatasetReader {
 public:
  // Opens read-only and checks the root attributes: an HDF5 file, hpctrain_format == 1, a known task,
  // label_names a non-empty JSON array of strings (an empty one for causal-lm), a tokenizer with vocab_size for
  // text tasks (text-classification, causal-lm).
  explicit DatasetReader(const std::filesystem::path& path);
  ~DatasetReader();
  DatasetReader(DatasetReader&&) noexcept;
  DatasetReader& operator=(DatasetReader&&) noexcept;

  [[nodiscard]] const std::filesystem::path& path() const;
  [[nodiscard]] Task task() const;
  [[nodiscard]] const std::vector<std::string>& label_names() const;
  [[nodiscard]] int64_t num_labels() const;
  [[nodiscard]] const nlohmann::json& tokenizer() const;
  [[nodiscard]] int64_t vocab_size() const;  // text: tokenizer["vocab_size"]; images: 0
  [[nodiscard]] const std::string& source() const;
  [[nodiscard]] const std::string& created_by() const;

  [[nodiscard]] std::vector<std::string> splits() const;  // in schema order: train, validation, test
  [[nodiscard]] bool has_split(const std::string& split) const;
  // Sizes, dtypes and ranks of the split's datasets are checked here (cheap: no data is read).
  // An unknown split throws an Error listing the available ones.
  [[nodiscard]] SplitInfo split_info(const std::string& split) const;

  // Full validation of a split, reading in bounded pieces (64 Ki examples, or 64 MiB of pixels, at a time).
  void validate_split(const std::string& split) const;
  // The same for examples [begin, end) only, plus the structural checks of split_info; lets every rank
  // validate its own shard so that together they cover the split.
  void validate_examples(const std::string& split, int64_t begin, int64_t end) const;

  // Examples [begin, end) as one contiguous hyperslab per dataset; offsets rebased to 0.
  [[nodiscard]] TextExamples read_text(const std::string& split, int64_t begin, int64_t end) const;
  // Examples in the order of `indices` (repeats allowed). Nearby indices are grouped into runs so a
  // sorted batch costs a few hyperslab reads rather than one per example.
  [[nodiscard]] TextExamples read_text_indices(const std::string& split, const std::vector<int64_t>& indices) const;
  [[nodiscard]] ImageExamples read_images(const std::string& split, int64_t begin, int64_t end) const;
  [[nodiscard]] ImageExamples read_image_indices(const std::string& split, const std::vector<int64_t>& indices) const;

  // Throws for a causal-lm file (it has no labels; read_text gives kNoLabel).
  [[nodiscard]] std::vector<int64_t> read_labels(const std::string& split, int64_t begin, int64_t end) const;
  // Input-file row of examples [begin, end) (predict reports it next to each prediction).
  [[nodiscard]] std::vector<int64_t> read_source_index(const std::string& split, int64_t begin, int64_t end) const;
  // Length in tokens of every example of a text split (from offsets, read in pieces).
  [[nodiscard]] std::vector<int64_t> read_lengths(const std::string& split) const;
  // Tokens held by examples [begin, end): offsets[end] - offsets[begin] (two small reads).
  [[nodiscard]] int64_t count_tokens(const std::string& split, int64_t begin, int64_t end) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace hpctrain::data
