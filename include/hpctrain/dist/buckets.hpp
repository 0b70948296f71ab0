// Gradient bucket assignment: which parameters share one fused allreduce (Note [Bucket order] in
// src/ddp/gradient_reducer.cpp).
// A pure function of the parameter sizes, so every rank computes the same buckets without talking.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace hpctrain::dist {

// Cap of the first bucket in bytes: small, so the first allreduce starts early in backward.
inline constexpr int64_t kDefaultFirstBucketBytes = int64_t{1} << 20;
// Cap of every later bucket in bytes.
inline constexpr int64_t kDefaultBucketBytes = int64_t{25} << 20;

// One bucket: parameter indices (registration order numbering), in the order they are laid out.
using Bucket = std::vector<std::size_t>;

// Assigns parameters to buckets.
//   sizes_bytes: bytes of each parameter's gradient as reduced, in registration order (>= 0).
//   groups: one key per parameter (e.g. the reduction dtype); parameters of different groups never
//           share a bucket. Empty means one group.
// Parameters are visited in reverse registration order (the order backward produces their
// gradients). Each group has one open bucket; a bucket closes once it holds at least its cap:
// first_bucket_bytes for the group's first bucket, bucket_bytes after. A parameter larger than the
// cap closes the open bucket and gets a bucket of its own. Buckets come out in the order they become
// complete in that visit (by their lowest parameter index, descending); every index appears exactly once.
std::vector<Bucket> assign_buckets(const std::vector<int64_t>& sizes_bytes, const std::vector<int>& groups,
                                   int64_t first_bucket_bytes = kDefaultFirstBucketBytes,
                                   int64_t bucket_bytes = kDefaultBucketBytes);

// Same, all parameters in one group.
std::vector<Bucket> assign_buckets(const std::vector<int64_t>& sizes_bytes,
                                   int64_t first_bucket_bytes = kDefaultFirstBucketBytes,
                                   int64_t bucket_bytes = kDefaultBucketBytes);

}  // namespace hpctrain::dist
