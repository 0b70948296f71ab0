// One micro-batch as tensors, and the collation that builds it from examples read from the dataset file.
// Text is padded to the longest example in the batch (optionally rounded up to a multiple, which helps
// kernels that like aligned sizes); images are normalized with the split's stored mean/std.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <vector>

#include "hpctrain/data/examples.hpp"
#include "hpctrain/data/sampler.hpp"

namespace hpctrain::loader {

// One micro-batch on this rank. Text batches define input_ids/attention_mask/token_type_ids (and position_ids for
// rows with document boundaries), image batches pixel_values; both define labels, example_index and is_padding.
struct Batch {
  torch::Tensor input_ids;       // int64 [B, L], pad id past each example's end
  torch::Tensor attention_mask;  // int64 [B, L], 1 on tokens, 0 on padding
  torch::Tensor token_type_ids;  // int64 [B, L], segment ids (zeros for single sentences)
  // int64 [B, L]: 1 on the tokens the loss is over, 0 on context and padding (Note [Loss mask] in
  // data/examples.hpp); undefined when the file has none (every token counts).
  torch::Tensor loss_mask;
  // int64 [B, L] for rows packed by documents (Note [Document boundaries] in src/data/examples.cpp), else
  // undefined: each token's position in its document, 0 at every document's first token (padding counts on).
  torch::Tensor position_ids;
  torch::Tensor pixel_values;    // float32 [B, C, H, W], (x/255 - mean[c]) / std[c]
  torch::Tensor labels;          // int64 [B]
  torch::Tensor example_index;   // int64 [B], index of each example in the split
  torch::Tensor is_padding;      // bool [B], wrap-around duplicates: exclude from metrics

  [[nodiscard]] int64_t size() const { return labels.defined() ? labels.size(0) : 0; }
};

// The batch with every tensor in page-locked (pinned) host memory: a copy to a CUDA device with
// non_blocking=true then runs asynchronously. Needs a CUDA LibTorch.
[[nodiscard]] Batch pin_memory(Batch batch);

struct CollateOptions {
  int pad_to_multiple_of = 1;  // L is rounded up to a multiple of this (1: no rounding)
  int64_t pad_token_id = 0;
};

// examples[i] is the example of positions[i]. Throws Error when the sizes disagree.
[[nodiscard]] Batch collate_text(const data::TextExamples& examples, const std::vector<data::SamplePosition>& positions,
                                 const CollateOptions& options);
// mean/std: per channel, of pixel/255 (SplitInfo); a std of 0 (a constant channel) divides by 1 instead.
[[nodiscard]] Batch collate_images(const data::ImageExamples& examples, const std::vector<data::SamplePosition>& positions,
                                   const std::vector<double>& mean, const std::vector<double>& stddev);

}  // namespace hpctrain::loader
