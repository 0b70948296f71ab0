// What `hpctrain env` reports about LibTorch: version, CUDA/cuDNN, BLAS, oneDNN, OpenMP (src/train/build_info.cpp).
#pragma once

#include <string>

namespace hpctrain::train {

struct TorchBuildInfo {
  std::string version;          // TORCH_VERSION of the headers compiled against, e.g. "1.13.0"
  bool cuda_built = false;      // at::hasCUDA(): the library has CUDA kernels and a driver answers
  int cuda_devices = 0;         // devices this process sees (CUDA_VISIBLE_DEVICES applied)
  std::string cuda_runtime;     // "12.4" (CUDART) when cuda_built, else ""
  std::string cudnn;            // "9.1.0" when cuDNN is present, else ""
  std::string blas;             // BLAS_INFO of the build settings ("open" = OpenBLAS, "mkl", ...)
  std::string lapack;           // LAPACK_INFO
  std::string onednn;           // at::get_mkldnn_version(), or "" without oneDNN
  std::string openmp;           // at::get_openmp_version(), or ""
  int intra_op_threads = 0;     // at::get_num_threads() now
};

TorchBuildInfo torch_build_info();

// Pure: the value of KEY in at::show_config()'s "Build settings: KEY=value, KEY=value, ..." line, or "".
std::string build_setting(const std::string& show_config, const std::string& key);

// Pure: CUDA's integer versions (CUDART 12040 -> "12.4"; cuDNN 90100 -> "9.1.0", 8902 -> "8.9.2").
std::string cuda_version_text(long version);
std::string cudnn_version_text(long version);

}  // namespace hpctrain::train
