// ZeRO's bucket layout (Note [ZeRO slices] in src/dist/zero_slices.cpp): where each parameter sits in its
// gradient bucket, which contiguous slice of every bucket each rank owns, and the per-parameter segments
// of a slice. Pure functions of parameter sizes, world size and alignments, so every rank computes every
// rank's slices without talking. No LibTorch.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace hpctrain::dist {

// One bucket laid out for sharding.
struct ZeroBucketLayout {
  std::vector<int64_t> offsets;  // element offset of each of the bucket's parameters in its buffer
  int64_t slice_numel = 0;       // elements each rank owns (a multiple of every alignment > 1 in the bucket)
  int64_t padded_numel = 0;      // world_size * slice_numel >= the parameters' end
};

// Lays out parameters of `numels` elements (bucket order) for `world_size` ranks: each parameter starts at
// a multiple of its alignment (`alignments[i]` elements, >= 1; 1 = anywhere), and the slice size is a
// multiple of every alignment in the bucket, so that every slice boundary that cuts a parameter falls on a
// multiple of that parameter's alignment counted from its start.
[[nodiscard]] ZeroBucketLayout zero_bucket_layout(const std::vector<int64_t>& numels,
                                                  const std::vector<int64_t>& alignments, int world_size);

// The part of one parameter a rank owns: elements [begin, end) of the flattened parameter, found at
// `slice_offset` in the rank's slice of the bucket. begin == end: it owns none of it.
struct ZeroSegment {
  int64_t begin = 0, end = 0;
  int64_t slice_offset = 0;
  [[nodiscard]] int64_t numel() const { return end - begin; }
};

// Rank `rank`'s segment of every parameter of a bucket laid out by zero_bucket_layout (one per parameter,
// in bucket order; empty ones where the rank owns nothing of it).
[[nodiscard]] std::vector<ZeroSegment> zero_segments(const ZeroBucketLayout& layout, const std::vector<int64_t>& numels,
                                                     int rank);

}  // namespace hpctrain::dist
