// Device binding by local rank (Note [One GPU per rank] in device.hpp).
#include "hpctrain/train/device.hpp"

#include <torch/cuda.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "hpctrain/compat/current_device.hpp"
#include "hpctrain/core/error.hpp"
#include "hpctrain/dist/comm.hpp"

namespace hpctrain::train {

namespace {

// Index of this rank's GPU, given that at least one is visible.
int gpu_index(const DeviceView& v) {
  if (v.visible_gpus >= v.local_size) return v.local_rank;
  if (v.node_shares_visible_devices && !v.share_gpus) {
    throw Error(fmt::format(
        "--device {}: all {} ranks on this node have CUDA_VISIBLE_DEVICES={} ({} visible CUDA device{}), so they "
        "would all train on the same GPU\n  hint: set CUDA_VISIBLE_DEVICES per rank (srun --gpus-per-task=1, or a "
        "wrapper using the local rank), leave it unset, or set HPCTRAIN_SHARE_GPUS=1 to share GPUs on purpose",
        v.choice, v.local_size, v.cuda_visible_devices.value_or("<unset>"), v.visible_gpus,
        v.visible_gpus == 1 ? "" : "s"));
  }
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

bool visible_devices_shared_on_node(const std::vector<std::optional<std::string>>& node_values) {
  if (node_values.size() < 2 || !node_values.front() || node_values.front()->empty()) return false;
  return std::all_of(node_values.begin(), node_values.end(),
                     [&](const std::optional<std::string>& value) { return value == node_values.front(); });
}

namespace {

// Collective: the CUDA_VISIBLE_DEVICES of every rank on this node (same host name), as a fixed-size record per
// rank gathered over the world (Comm has no node communicator).
std::vector<std::optional<std::string>> node_visible_devices(dist::Comm& comm, const char* visible) {
  constexpr std::size_t kHost = 128, kValue = 512;
  struct Record {
    char host[kHost] = {};
    char value[kValue] = {};
    bool set = false;
  };
  Record mine;
  (void)gethostname(mine.host, kHost - 1);
  mine.set = visible != nullptr;
  if (visible != nullptr) std::strncpy(mine.value, visible, kValue - 1);
  std::vector<Record> all(static_cast<std::size_t>(comm.world_size()));
  comm.allgather(&mine, sizeof(Record), all.data());
  std::vector<std::optional<std::string>> node;
  for (const Record& r : all) {
    if (std::strncmp(r.host, mine.host, kHost) != 0) continue;
    node.push_back(r.set ? std::optional<std::string>(std::string(r.value)) : std::nullopt);
  }
  return node;
}

}  // namespace

at::Device select_device(const std::string& choice, dist::Comm& comm) {
  DeviceView view;
  view.choice = choice;
  view.local_rank = comm.local_rank();
  view.local_size = comm.local_size();
  if (choice != "cpu" && torch::cuda::is_available()) view.visible_gpus = static_cast<int>(torch::cuda::device_count());
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  if (visible != nullptr) view.cuda_visible_devices = visible;
  const char* share = std::getenv("HPCTRAIN_SHARE_GPUS");
  view.share_gpus = share != nullptr && std::strcmp(share, "1") == 0;
  if (choice != "cpu") view.node_shares_visible_devices = visible_devices_shared_on_node(node_visible_devices(comm, visible));
  return plan_device(view);
}

void check_device_supported(const at::Device& device, bool built_with_cuda) {
  HPCTRAIN_CHECK(!device.is_cuda() || built_with_cuda,
                 "device {}: this hpctrain was built without CUDA support, so it cannot train on a GPU (its gradient "
                 "reducer, fences and kernels are CPU-only)\n  hint: configure with -DHPCTRAIN_WITH_CUDA=ON against a "
                 "CUDA LibTorch (scripts/setup-torch2.sh), or use --device cpu", device.str());
}

void use_device(const at::Device& device) {
#if HPCTRAIN_WITH_CUDA
  check_device_supported(device, true);
#else
  check_device_supported(device, false);
#endif
  compat::make_device_current(device);
}

}  // namespace hpctrain::train
