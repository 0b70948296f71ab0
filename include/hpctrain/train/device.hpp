// Device binding: each rank picks its device from its local rank (one GPU per rank) or the CPU.
#pragma once

#include <c10/core/Device.h>

#include <string>

namespace hpctrain::train {

// choice: "auto" (CUDA device local_rank % device_count when CUDA is available, else CPU), "cpu",
// or "cuda" (Error when this LibTorch has no usable CUDA device).
at::Device select_device(const std::string& choice, int local_rank);

}  // namespace hpctrain::train
