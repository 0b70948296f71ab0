// Device binding: each rank picks its device from its local rank (one GPU per rank) or the CPU.
#pragma once

#include <c10/core/Device.h>

#include <optional>
#include <string>
#include <vector>

namespace hpctrain::dist {
class Comm;
}

namespace hpctrain::train {

// What a rank sees when it chooses its device (the inputs of plan_device, gathered by select_device).
struct DeviceView {
  std::string choice = "auto";  // --device: auto | cpu | cuda
  int local_rank = 0;           // this rank among the ranks on its node
  int local_size = 1;           // ranks on the node
  int visible_gpus = 0;         // CUDA devices this process sees (CUDA_VISIBLE_DEVICES already applied)
  std::optional<std::string> cuda_visible_devices;  // the variable as set, if set
  bool share_gpus = false;      // HPCTRAIN_SHARE_GPUS=1: several ranks may use one GPU
  // Every rank of this node has CUDA_VISIBLE_DEVICES set to this same value (visible_devices_shared_on_node).
  bool node_shares_visible_devices = false;
};

// Note [One GPU per rank]: rank r on a node uses CUDA device r when the node's ranks see at least as many
// devices as there are ranks. A launcher that binds one GPU per task (srun --gpus-per-task=1, or a wrapper
// setting CUDA_VISIBLE_DEVICES per rank) leaves each rank one visible device: it uses device 0. Fewer devices
// than ranks otherwise is an Error naming both counts, unless sharing is asked for (HPCTRAIN_SHARE_GPUS=1:
// device local_rank % visible). "auto" without a visible device is the CPU; "cuda" without one is an Error.
// One CUDA_VISIBLE_DEVICES exported to every rank of a node (mpirun -x CUDA_VISIBLE_DEVICES=0) is not a per-rank
// binding: when it leaves fewer devices than ranks, that is an Error naming the variable (all ranks would
// silently train on one GPU), unless HPCTRAIN_SHARE_GPUS=1.
// Pure: the decision for a DeviceView, no CUDA calls.
[[nodiscard]] at::Device plan_device(const DeviceView& view);

// Whether the ranks of one node (their CUDA_VISIBLE_DEVICES values, unset as nullopt) share one setting: more
// than one rank, each with the variable set, all to the same non-empty value. Pure.
[[nodiscard]] bool visible_devices_shared_on_node(const std::vector<std::optional<std::string>>& node_values);

// Collective unless choice is "cpu" (every rank passes the same choice): plan_device for this process, with
// visible_gpus from LibTorch, CUDA_VISIBLE_DEVICES and HPCTRAIN_SHARE_GPUS from the environment, and the
// CUDA_VISIBLE_DEVICES of this node's other ranks gathered over `comm`.
[[nodiscard]] at::Device select_device(const std::string& choice, dist::Comm& comm);

// Refuses a CUDA device in a build without CUDA support (hpctrain_torch configured without
// -DHPCTRAIN_WITH_CUDA=ON): an Error naming the option, thrown at start-up rather than at the first backward.
void check_device_supported(const at::Device& device, bool built_with_cuda);

// Note [Current device]
// Each rank makes its device current (cudaSetDevice) before any CUDA work: otherwise work issued without an
// explicit device (a CUDA context, stream or event, cuBLAS handles) lands on GPU 0 whatever --device says. The
// current device is per thread: the Accelerator makes it current on the rank's main thread, and the gradient
// reducer's communication thread makes it current first thing (src/ddp/gradient_reducer.cpp); autograd's
// device threads set it themselves. check_device_supported(device, this build), then the device made current
// on the calling thread (nothing for the CPU).
void use_device(const at::Device& device);

}  // namespace hpctrain::train
