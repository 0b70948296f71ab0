#include "hpctrain/dist/buckets.hpp"

#include <algorithm>
#include <map>

#include "hpctrain/core/error.hpp"

namespace hpctrain::dist {
namespace {

// The bucket a group is filling.
struct OpenBucket {
  Bucket members;
  int64_t bytes = 0;
  bool is_first = true;  // the group's first bucket closes at first_bucket_bytes
};

void validate(const std::vector<int64_t>& sizes_bytes, const std::vector<int>& groups, int64_t first_bucket_bytes,
              int64_t bucket_bytes) {
  HPCTRAIN_CHECK(first_bucket_bytes > 0 && bucket_bytes > 0,
                 "bucket caps must be positive: expected first_bucket_bytes > 0 and bucket_bytes > 0, got {} and {}",
                 first_bucket_bytes, bucket_bytes);
  HPCTRAIN_CHECK(groups.empty() || groups.size() == sizes_bytes.size(),
                 "assign_buckets: expected one group per parameter ({}), got {}", sizes_bytes.size(), groups.size());
  for (std::size_t i = 0; i < sizes_bytes.size(); ++i) {
    HPCTRAIN_CHECK(sizes_bytes[i] >= 0, "assign_buckets: parameter {} has negative size {} bytes", i, sizes_bytes[i]);
  }
}

}  // namespace

std::vector<Bucket> assign_buckets(const std::vector<int64_t>& sizes_bytes, const std::vector<int>& groups,
                                   int64_t first_bucket_bytes, int64_t bucket_bytes) {
  validate(sizes_bytes, groups, first_bucket_bytes, bucket_bytes);
  std::map<int, OpenBucket> open_by_group;
  std::vector<Bucket> buckets;
  auto close = [&buckets](OpenBucket& open) {
    if (!open.members.empty()) buckets.push_back(std::move(open.members));
    open.members.clear();
    open.bytes = 0;
    open.is_first = false;
  };

  for (std::size_t i = sizes_bytes.size(); i-- > 0;) {
    OpenBucket& open = open_by_group[groups.empty() ? 0 : groups[i]];
    const int64_t cap = open.is_first ? first_bucket_bytes : bucket_bytes;
    if (sizes_bytes[i] > cap) {  // too large to share: the open bucket closes, this one stands alone
      close(open);
      buckets.push_back({i});
      continue;
    }
    open.members.push_back(i);
    open.bytes += sizes_bytes[i];
    if (open.bytes >= cap) close(open);
  }
  for (auto& [group, open] : open_by_group) close(open);

  // Members were appended in descending index order, so back() is a bucket's lowest index: the
  // parameter whose gradient completes it when backward runs in reverse registration order.
  std::sort(buckets.begin(), buckets.end(),
            [](const Bucket& a, const Bucket& b) { return a.back() > b.back(); });
  return buckets;
}

std::vector<Bucket> assign_buckets(const std::vector<int64_t>& sizes_bytes, int64_t first_bucket_bytes,
                                   int64_t bucket_bytes) {
  return assign_buckets(sizes_bytes, {}, first_bucket_bytes, bucket_bytes);
}

}  // namespace hpctrain::dist
