// plan_bucket_place (bucket_place.hpp).
#include "bucket_place.hpp"

namespace hpctrain::ddp {

// CPU parameters keep their buckets even with one rank: the tests of the reducer's bookkeeping run on one
// process, and a host memcpy per gradient is cheap next to the PCIe round trip a single GPU rank would pay.
BucketPlace plan_bucket_place(const c10::Device& parameters_device, const dist::Comm& comm) {
  if (parameters_device.is_cpu()) return BucketPlace::host;
  if (comm.world_size() == 1) return BucketPlace::none;
  if (!parameters_device.is_cuda()) return BucketPlace::host;
  return comm.accepts(dist::MemoryKind::cuda) ? BucketPlace::device : BucketPlace::pinned_host;
}

}  // namespace hpctrain::ddp
