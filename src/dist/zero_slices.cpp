// ZeRO's bucket layout (zero_slices.hpp).
#include "hpctrain/dist/zero_slices.hpp"

#include <algorithm>
#include <numeric>

#include "hpctrain/core/error.hpp"

// Note [ZeRO slices]
// With --zero-stage 1 or 2 every gradient bucket is reduce-scattered instead of allreduced: rank r receives
// the averaged elements [r S, (r + 1) S) of the bucket, its slice, where S = slice_numel and the bucket is
// padded with zeros to world_size * S elements (zeros add nothing to sums or norms). The optimizer keeps
// state for, and updates, only those elements, as one segment per parameter (the intersection of the slice
// with the parameter, contiguous because both are), so per-parameter groups (weight decay) and per-parameter
// state keep working; then the updated slices are all-gathered back into every rank's parameters.
// Elementwise update rules (AdamW, SGD) give bit for bit stage 0's result on any segmentation. 8-bit AdamW
// quantizes each parameter in blocks of 256 elements counted from the parameter's start
// (src/optim/blockwise_quant.cpp), so a segment must start on a block boundary of its parameter to hold whole
// blocks of it: such parameters get alignment 256 (Optimizer::segment_alignment), their offsets in the bucket
// are multiples of 256 and S is a multiple of 256, hence every cut r S - offset is one too. Parameters of
// alignment 1 are packed as in stage 0, and a bucket without aligned parameters pads only to a multiple of
// world_size. A segment's state is then exactly the matching part of the whole parameter's state, which is
// what lets checkpoints keep stage 0's layout (src/train/zero_optimizer.cpp, Note [ZeRO checkpoints]).
namespace hpctrain::dist {
namespace {

int64_t round_up(int64_t value, int64_t multiple) { return (value + multiple - 1) / multiple * multiple; }

}  // namespace

ZeroBucketLayout zero_bucket_layout(const std::vector<int64_t>& numels, const std::vector<int64_t>& alignments,
                                    int world_size) {
  HPCTRAIN_CHECK(world_size >= 1, "zero_bucket_layout: world_size {}: expected >= 1", world_size);
  HPCTRAIN_CHECK(numels.size() == alignments.size(), "zero_bucket_layout: {} sizes but {} alignments", numels.size(),
                 alignments.size());
  ZeroBucketLayout layout;
  int64_t end = 0, bucket_alignment = 1;
  for (std::size_t i = 0; i < numels.size(); ++i) {
    HPCTRAIN_CHECK(numels[i] >= 0 && alignments[i] >= 1, "zero_bucket_layout: parameter {} has {} elements, "
                   "alignment {}; expected >= 0 and >= 1", i, numels[i], alignments[i]);
    const int64_t offset = round_up(end, alignments[i]);
    layout.offsets.push_back(offset);
    end = offset + numels[i];
    bucket_alignment = std::lcm(bucket_alignment, alignments[i]);
  }
  layout.slice_numel = round_up((end + world_size - 1) / world_size, bucket_alignment);
  layout.padded_numel = layout.slice_numel * world_size;
  return layout;
}

std::vector<ZeroSegment> zero_segments(const ZeroBucketLayout& layout, const std::vector<int64_t>& numels, int rank) {
  const int64_t first = layout.slice_numel * rank, last = first + layout.slice_numel;
  std::vector<ZeroSegment> segments;
  for (std::size_t i = 0; i < numels.size(); ++i) {
    const int64_t start = layout.offsets[i], stop = start + numels[i];
    const int64_t from = std::clamp(first, start, stop), to = std::clamp(last, start, stop);
    ZeroSegment segment;
    segment.begin = from - start;
    segment.end = std::max(from, to) - start;
    segment.slice_offset = from - first;
    if (segment.numel() == 0) segment.slice_offset = 0;
    segments.push_back(segment);
  }
  return segments;
}

}  // namespace hpctrain::dist
