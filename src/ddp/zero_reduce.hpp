// ZeRO's two bucket collectives (Note [ZeRO gradient reduction] in src/ddp/zero_reduce.cpp): the
// reduce-scatter of a gradient bucket into this rank's slice, and the all-gather of updated parameter
// slices. Internal to src/ddp.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>

#include "hpctrain/dist/comm.hpp"

namespace hpctrain::ddp {

// Sums the contiguous `values` (world_size * slice.numel() elements, float32 or float64) over the ranks
// into this rank's `slice` and divides it by world_size. `wire` bf16: packed to bf16 (torch's rounding),
// summed with the bf16 user operation, unpacked, divided in float32 (Note [bf16 gradient reduction]);
// `scratch` keeps the bf16 copies between calls. `fence` runs before the collective on the buffer it reads
// and after the division (Note [Fenced collectives]). Returns the bytes counted by the communicator.
int64_t reduce_scatter_mean(dist::Comm& comm, const at::Tensor& values, const at::Tensor& slice, dist::DType wire,
                            at::Tensor& scratch, const std::function<void(const at::Tensor&)>& fence);

// Every rank's slice r of the contiguous `values` (world_size equal slices) reaches every rank.
void allgather_slices(dist::Comm& comm, const at::Tensor& values, const std::function<void(const at::Tensor&)>& fence);

}  // namespace hpctrain::ddp
