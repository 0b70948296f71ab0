// Device binding by local rank (Note [One GPU per rank] in device.hpp).
#include "hpctrain/train/device.hpp"

#include <torch/cuda.h>

#include <cstdlib>
#include <cstring>

#include "hpctrain/core/error.hpp"

namespace hpctrain::train {

namespace {

// Index of this rank's GPU, given that at least one is visible.
int gpu_index(const DeviceView& v) {
  if (v.visible_gpus >= v.local_size) return v.local_rank;
  const bool bound_per_rank = v.visible_gpus == 1 && v.cuda_visible_devices && !v.cuda_visible_devices->empty();
  if (bound_per_rank || v.share_gpus) return v.local_rank % v.visible_gpus;
  throw Error(fmt::format(
      "--device {}: {} ranks on this node but {} visible CUDA device{} (CUDA_VISIBLE_DEVICES={})\n"
      "  hint: start at most {} rank{} per node, bind one GPU per rank (srun --gpus-per-task=1), or set "
      "HPCTRAIN_SHARE_GPUS=1 to let ranks share GPUs",
      v.choice, v.local_size, v.visible_gpus, v.visible_gpus == 1 ? "" : "s",
      v.cuda_visible_devices.value_or("<unset>"), v.visible_gpus, v.visible_gpus == 1 ? "" : "s"));
}

}  // namespace

at::Device plan_device(const DeviceView& v) {
  HPCTRAIN_CHECK(v.choice == "auto" || v.choice == "cpu" || v.choice == "cuda",
                 "--device: expected auto, cpu or cuda, got '{}'", v.choice);
  HPCTRAIN_CHECK(v.local_rank >= 0 && v.local_rank < v.local_size, "local rank {} outside the node's {} ranks",
                 v.local_rank, v.local_size);
  if (v.choice == "cpu") return at::Device(at::kCPU);
  if (v.choice == "cuda")
    HPCTRAIN_CHECK(v.visible_gpus > 0,
                   "--device cuda: this process sees no CUDA device (CUDA_VISIBLE_DEVICES={})\n"
                   "  hint: use --device cpu, or a build against a CUDA LibTorch (scripts/setup-torch2.sh)",
                   v.cuda_visible_devices.value_or("<unset>"));
  if (v.visible_gpus <= 0) return at::Device(at::kCPU);
  return at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(gpu_index(v)));
}

at::Device select_device(const std::string& choice, int local_rank, int local_size) {
  DeviceView view;
  view.choice = choice;
  view.local_rank = local_rank;
  view.local_size = local_size;
  if (choice != "cpu" && torch::cuda::is_available()) view.visible_gpus = static_cast<int>(torch::cuda::device_count());
  if (const char* visible = std::getenv("CUDA_VISIBLE_DEVICES")) view.cuda_visible_devices = visible;
  const char* share = std::getenv("HPCTRAIN_SHARE_GPUS");
  view.share_gpus = share != nullptr && std::strcmp(share, "1") == 0;
  return plan_device(view);
}

}  // namespace hpctrain::train
