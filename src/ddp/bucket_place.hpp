// Where the gradient reducer keeps its buckets (Note [Device buckets] in gradient_reducer.cpp): a pure function of
// the parameters' device, the world size and what the communicator accepts, so it is tested without a GPU.
// Internal to src/ddp.
#pragma once

#include <c10/core/Device.h>

#include "hpctrain/dist/comm.hpp"

namespace hpctrain::ddp {

enum class BucketPlace {
  none,         // one rank, parameters off the CPU: no buckets, no hooks, no copies (.grad is already the average)
  host,         // CPU parameters: buckets in ordinary host memory (their .grads become bucket views)
  pinned_host,  // GPU parameters, MPI not CUDA-aware: staged through pinned host memory
  device,       // GPU parameters, CUDA-aware MPI: buckets on the parameters' GPU
};

[[nodiscard]] BucketPlace plan_bucket_place(const c10::Device& parameters_device, const dist::Comm& comm);

}  // namespace hpctrain::ddp
