// Tensors in and out of safetensors files: the one at::ScalarType <-> io::DType mapping, CPU copies of
// tensors as io::TensorViews, whole tensor files, and the strict copy of a loaded map into live tensors.
// (The rank-0-to-all broadcast of a map is ddp::broadcast_tensors; checkpoint folders are train/checkpoint.hpp.)
#pragma once

#include <ATen/core/Tensor.h>

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "hpctrain/io/dtype.hpp"
#include "hpctrain/io/safetensors.hpp"

namespace hpctrain::models {

using TensorMap = std::map<std::string, at::Tensor>;  // name -> tensor, sorted by name

// The safetensors dtype of a LibTorch dtype (Error naming `name` when it has none), and the inverse.
[[nodiscard]] io::DType to_io_dtype(at::ScalarType type, const std::string& name);
[[nodiscard]] at::ScalarType to_scalar_type(io::DType dtype);

// CPU, contiguous copies of tensors and io::TensorViews into them (valid while this object lives).
struct HostViews {
  std::vector<at::Tensor> host;
  std::vector<io::TensorView> views;
};
[[nodiscard]] HostViews host_views(const std::map<std::string, at::Tensor>& tensors);
// Streamed writes (Note [Streamed writes] in src/train/streamed_save.cpp): the views of `tensors` without their data (names, io dtypes, shapes, nbytes), floating
// tensors counted in `dtype` when given; and one tensor's host bytes as a writer wants them (CPU, contiguous, in
// `dtype` when floating).
[[nodiscard]] std::vector<io::TensorView> layout_views(const std::map<std::string, at::Tensor>& tensors,
                                                       std::optional<at::ScalarType> dtype = std::nullopt);
[[nodiscard]] at::Tensor host_tensor(const at::Tensor& tensor, std::optional<at::ScalarType> dtype = std::nullopt);

// A CPU tensor holding a copy of the view's bytes (safetensors data is little-endian and may be unaligned).
[[nodiscard]] at::Tensor to_tensor(const io::TensorView& view);

// Safetensors file of CPU copies of `tensors` ({"format": "pt"} metadata, atomic), and the inverse.
void save_tensor_file(const std::filesystem::path& path, const TensorMap& tensors);
[[nodiscard]] TensorMap load_tensor_file(const std::filesystem::path& path);

// Strict copy of `source` into `target` by name (every name in both, same shapes; dtype converted).
// Error naming `what`, and every missing, unexpected and wrong-shaped tensor in one message.
void copy_tensors_strict(const TensorMap& source, const TensorMap& target, const std::string& what);

}  // namespace hpctrain::models
