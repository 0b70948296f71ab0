// In-memory example containers, laid out like the HDF5 split they are written to or read from.
// TextExamples stores token ids concatenated with an offsets array (CSR layout); ImageExamples stores
// uint8 images back to back in [N, C, H, W] order. Neither knows about HDF5 or LibTorch.
#pragma once

#include <cstdint>
#include <vector>

namespace hpctrain::data {

// The label of an example in a file without labels (task causal-lm): the reader fills `labels` with it.
inline constexpr int64_t kNoLabel = -1;

struct TextExamples {
  std::vector<int32_t> input_ids;        // all examples' token ids, concatenated
  std::vector<int64_t> offsets{0};       // example i = input_ids[offsets[i] : offsets[i+1]]; offsets[0] == 0
  std::vector<uint8_t> token_type_ids;   // empty, or one segment id per token (sentence pairs)
  // Empty, or one flag per token: 1 at the first token of each document of a row packed from several documents
  // (`prep lm --packing bfd`; Note [Document boundaries] in src/data/examples.cpp), so token 0 of a row is 1.
  std::vector<uint8_t> document_start;
  // Note [Loss mask]: empty, or one per token: 1 where the token is a target of the loss (prep sft: the
  // assistant's or the completion's tokens), 0 where it is context only.
  std::vector<uint8_t> loss_mask;
  std::vector<int64_t> labels;           // one per example (kNoLabel in a causal-lm file)
  std::vector<int64_t> source_index;     // row of the example in its input file (0-based, data rows only)

  [[nodiscard]] int64_t size() const { return static_cast<int64_t>(offsets.size()) - 1; }
  [[nodiscard]] int64_t num_tokens() const { return offsets.back(); }
  [[nodiscard]] int64_t length(int64_t i) const { return offsets[i + 1] - offsets[i]; }
  [[nodiscard]] bool has_token_type_ids() const { return !token_type_ids.empty(); }
  [[nodiscard]] bool has_document_starts() const { return !document_start.empty(); }
  [[nodiscard]] bool has_loss_mask() const { return !loss_mask.empty(); }

  // Appends one example. `type_ids` is empty for single sentences, else ids.size() segment ids; `starts` is
  // empty, or ids.size() document-start flags; `mask` is empty or ids.size() loss-mask values (each present in
  // every example or in none).
  void append(const std::vector<int32_t>& ids, const std::vector<uint8_t>& type_ids, int64_t label,
              int64_t source_row, const std::vector<uint8_t>& starts = {}, const std::vector<uint8_t>& mask = {});
  // Appends example `i` of `other`.
  void append_from(const TextExamples& other, int64_t i);
  // Appends every example of `documents` as one example, a row packed from documents (Note [Document boundaries]):
  // their tokens concatenated, document_start 1 at each one's first token (and where `documents` has it), their
  // loss masks concatenated, the label and source_index of the first. Needs at least one example; token_type_ids
  // and loss_mask as append_all.
  void append_packed(const TextExamples& documents);
  // Appends every example of `other` (bulk copies; token_type_ids, document_start and loss_mask must be present in
  // both or neither).
  void append_all(const TextExamples& other);
  // Throws Error (naming `what`) when the arrays disagree: offsets not starting at 0, not monotone,
  // offsets.back() != input_ids.size(), labels/source_index not one per example, token_type_ids, loss_mask or
  // document_start length, a document_start flag other than 0/1 or a row whose first token does not start a document.
  void check_consistent(const char* what) const;
};

struct ImageExamples {
  int64_t channels = 1, height = 0, width = 0;
  std::vector<uint8_t> pixels;           // [N, C, H, W], row-major
  std::vector<int64_t> labels;
  std::vector<int64_t> source_index;

  [[nodiscard]] int64_t size() const { return static_cast<int64_t>(labels.size()); }
  [[nodiscard]] int64_t image_bytes() const { return channels * height * width; }
  [[nodiscard]] const uint8_t* image(int64_t i) const { return pixels.data() + i * image_bytes(); }

  // Appends one image of image_bytes() bytes.
  void append(const uint8_t* image_pixels, int64_t label, int64_t source_row);
  void append_from(const ImageExamples& other, int64_t i);
  void append_all(const ImageExamples& other);
  void check_consistent(const char* what) const;
};

// Rows `rows` of `examples`, in that order (rows may repeat).
[[nodiscard]] TextExamples gather(const TextExamples& examples, const std::vector<int64_t>& rows);
[[nodiscard]] ImageExamples gather(const ImageExamples& examples, const std::vector<int64_t>& rows);

}  // namespace hpctrain::data
