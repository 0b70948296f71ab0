// Device binding: each rank picks its device from its local rank (one GPU per rank) or the CPU.
#pragma once

#include <c10/core/Device.h>

#include <optional>
#include <string>

namespace hpctrain::train {

// What a rank sees when it chooses its device (the inputs of plan_device, gathered by select_device).
struct DeviceView {
  std::string choice = "auto";  // --device: auto | cpu | cuda
  int local_rank = 0;           // this rank among the ranks on its node
  int local_size = 1;           // ranks on the node
  int visible_gpus = 0;         // CUDA devices this process sees (CUDA_VISIBLE_DEVICES already applied)
  std::optional<std::string> cuda_visible_devices;  // the variable as set, if set
  bool share_gpus = false;      // HPCTRAIN_SHARE_GPUS=1: several ranks may use one GPU
};

// Note [One GPU per rank]: rank r on a node uses CUDA device r when the node's ranks see at least as many
// devices as there are ranks. A launcher that binds one GPU per task (srun --gpus-per-task=1, or a wrapper
// setting CUDA_VISIBLE_DEVICES per rank) leaves each rank one visible device: it uses device 0. Fewer devices
// than ranks otherwise is an Error naming both counts, unless sharing is asked for (HPCTRAIN_SHARE_GPUS=1:
// device local_rank % visible). "auto" without a visible device is the CPU; "cuda" without one is an Error.
// Pure: the decision for a DeviceView, no CUDA calls.
[[nodiscard]] at::Device plan_device(const DeviceView& view);

// plan_device for this process: visible_gpus from LibTorch, CUDA_VISIBLE_DEVICES and HPCTRAIN_SHARE_GPUS from
// the environment.
[[nodiscard]] at::Device select_device(const std::string& choice, int local_rank, int local_size);

}  // namespace hpctrain::train
