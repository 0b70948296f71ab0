// build_info.hpp: LibTorch's build as the library itself reports it.
#include "hpctrain/train/build_info.hpp"

#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <ATen/Version.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <fmt/format.h>
#include <torch/cuda.h>
#include <torch/version.h>

namespace hpctrain::train {

std::string build_setting(const std::string& show_config, const std::string& key) {
  const std::string needle = key + "=";
  std::size_t at = show_config.find(needle);
  // The key must start a setting: at the line's "Build settings: " or after ", ".
  while (at != std::string::npos && at > 0 && show_config[at - 1] != ' ') at = show_config.find(needle, at + 1);
  if (at == std::string::npos) return "";
  const std::size_t start = at + needle.size();
  const std::size_t end = show_config.find_first_of(",\n", start);
  return show_config.substr(start, end == std::string::npos ? std::string::npos : end - start);
}

std::string cuda_version_text(long version) { return fmt::format("{}.{}", version / 1000, version % 1000 / 10); }

std::string cudnn_version_text(long version) {
  if (version >= 90000) return fmt::format("{}.{}.{}", version / 10000, version % 10000 / 100, version % 100);
  return fmt::format("{}.{}.{}", version / 1000, version % 1000 / 100, version % 100);
}

TorchBuildInfo torch_build_info() {
  TorchBuildInfo info;
  info.version = TORCH_VERSION;
  const std::string config = at::show_config();
  info.blas = build_setting(config, "BLAS_INFO");
  info.lapack = build_setting(config, "LAPACK_INFO");
  if (at::hasMKLDNN()) info.onednn = at::get_mkldnn_version();
  if (at::hasOpenMP()) info.openmp = at::get_openmp_version();
  info.intra_op_threads = at::get_num_threads();
  info.cuda_built = at::hasCUDA();
  if (!info.cuda_built) return info;
  info.cuda_devices = static_cast<int>(torch::cuda::device_count());
  info.cuda_runtime = cuda_version_text(at::detail::getCUDAHooks().versionCUDART());
  if (at::globalContext().hasCuDNN()) info.cudnn = cudnn_version_text(at::detail::getCUDAHooks().versionCuDNN());
  return info;
}

}  // namespace hpctrain::train
