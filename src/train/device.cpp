#include "hpctrain/train/device.hpp"

#include <torch/cuda.h>

#include "hpctrain/core/error.hpp"

namespace hpctrain::train {

at::Device select_device(const std::string& choice, int local_rank) {
  HPCTRAIN_CHECK(choice == "auto" || choice == "cpu" || choice == "cuda", "--device: expected auto, cpu or cuda, got '{}'",
                 choice);
  if (choice == "cpu") return at::Device(at::kCPU);
  const bool cuda = torch::cuda::is_available();
  if (choice == "cuda")
    HPCTRAIN_CHECK(cuda, "--device cuda: this build of LibTorch sees no CUDA device\n  hint: use --device cpu, or a CUDA LibTorch");
  if (!cuda) return at::Device(at::kCPU);
  const auto count = static_cast<int>(torch::cuda::device_count());
  return at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(local_rank % count));
}

}  // namespace hpctrain::train
