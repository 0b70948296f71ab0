// AdamW over lists of tensors (Note [AdamW off the CPU] in adamw.cpp). Internal to src/optim; its own header so
// that a CPU test compares the multi-tensor update with the per-tensor one.
#pragma once

#include <ATen/core/Tensor.h>

#include <vector>

#include "adamw_kernel.hpp"

namespace hpctrain::optim::detail {

// Parameters of one device, dtype and weight decay, with their gradients and moments, index for index.
struct TensorLists {
  std::vector<at::Tensor> params, grads, exp_avgs, exp_avg_sqs;
};

// torch.optim.AdamW(foreach=True): the per-tensor update's operations, in its order, as _foreach_ operations
// (CPU and CUDA tensors). Reads nothing back to the host.
void adamw_foreach_update(TensorLists& lists, const AdamWScalars& scalars);

}  // namespace hpctrain::optim::detail
