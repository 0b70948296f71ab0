// ZeRO's bucket collectives (zero_reduce.hpp).
#include "zero_reduce.hpp"

#include <ATen/ATen.h>

#include "hpctrain/core/error.hpp"

namespace hpctrain::ddp {

int64_t reduce_scatter_mean(dist::Comm& comm, const at::Tensor& values, const at::Tensor& slice, dist::DType wire,
                            at::Tensor& scratch, const std::function<void(const at::Tensor&)>& fence) {
  const int world = comm.world_size();
  const int64_t count = slice.numel();
  HPCTRAIN_CHECK(values.numel() == count * world && values.is_contiguous() && slice.is_contiguous(),
                 "reduce_scatter_mean: {} values for slices of {} on {} ranks", values.numel(), count, world);
  const int64_t sent = wire == dist::DType::bf16 ? 2 : static_cast<int64_t>(values.element_size());
  if (wire == dist::DType::bf16) {
    if (!scratch.defined() || scratch.numel() < count * (world + 1))
      scratch = at::empty({count * (world + 1)}, values.options().dtype(at::kBFloat16));
    at::Tensor packed = scratch.narrow(0, 0, count * world);
    at::Tensor received = scratch.narrow(0, count * world, count);
    packed.copy_(values);
    fence(packed);
    comm.reduce_scatter(packed.data_ptr(), received.data_ptr(), static_cast<std::size_t>(count), dist::DType::bf16,
                        dist::ReduceOp::sum);
    slice.copy_(received);
  } else {
    fence(values);
    comm.reduce_scatter(values.data_ptr(), slice.data_ptr(), static_cast<std::size_t>(count),
                        values.scalar_type() == at::kDouble ? dist::DType::f64 : dist::DType::f32, dist::ReduceOp::sum);
  }
  if (world > 1) slice.div_(world);
  fence(slice);
  return count * world * sent / 2;  // as Comm::bytes_sent counts a reduce-scatter
}

void allgather_slices(dist::Comm& comm, const at::Tensor& values, const std::function<void(const at::Tensor&)>& fence) {
  HPCTRAIN_CHECK(values.is_contiguous() && values.numel() % comm.world_size() == 0,
                 "allgather_slices: {} values do not split into {} slices", values.numel(), comm.world_size());
  fence(values);
  comm.allgather_in_place(values.data_ptr(), values.nbytes() / static_cast<std::size_t>(comm.world_size()));
  fence(values);
}

}  // namespace hpctrain::ddp
