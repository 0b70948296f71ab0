// Tensor files and the dtype mapping (tensor_io.hpp).
#include "hpctrain/models/tensor_io.hpp"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstring>

#include "hpctrain/core/error.hpp"

namespace hpctrain::models {

io::DType to_io_dtype(at::ScalarType type, const std::string& name) {
  switch (type) {
    case at::kBool: return io::DType::boolean;
    case at::kByte: return io::DType::u8;
    case at::kChar: return io::DType::i8;
    case at::kShort: return io::DType::i16;
    case at::kHalf: return io::DType::f16;
    case at::kBFloat16: return io::DType::bf16;
    case at::kInt: return io::DType::i32;
    case at::kFloat: return io::DType::f32;
    case at::kDouble: return io::DType::f64;
    case at::kLong: return io::DType::i64;
    default: fail("cannot save tensor '{}': dtype {} has no safetensors equivalent", name, c10::toString(type));
  }
}

at::ScalarType to_scalar_type(io::DType dtype) {
  switch (dtype) {
    case io::DType::boolean: return at::kBool;
    case io::DType::u8: return at::kByte;
    case io::DType::i8: return at::kChar;
    case io::DType::i16: return at::kShort;
    case io::DType::f16: return at::kHalf;
    case io::DType::bf16: return at::kBFloat16;
    case io::DType::i32: return at::kInt;
    case io::DType::f32: return at::kFloat;
    case io::DType::f64: return at::kDouble;
    case io::DType::i64: return at::kLong;
  }
  fail("unknown safetensors dtype");
}

HostViews host_views(const std::map<std::string, at::Tensor>& tensors) {
  HostViews out;
  out.host.reserve(tensors.size());  // the views point into these: no reallocation
  for (const auto& [name, tensor] : tensors) {
    out.host.push_back(tensor.detach().to(at::kCPU).contiguous());
    const at::Tensor& t = out.host.back();
    out.views.push_back(io::TensorView{name, to_io_dtype(t.scalar_type(), name),
                                       std::vector<int64_t>(t.sizes().begin(), t.sizes().end()),
                                       static_cast<const std::byte*>(t.data_ptr()), t.nbytes()});
  }
  return out;
}

std::vector<io::TensorView> layout_views(const std::map<std::string, at::Tensor>& tensors,
                                         std::optional<at::ScalarType> dtype) {
  std::vector<io::TensorView> views;
  for (const auto& [name, tensor] : tensors) {
    const at::ScalarType type = dtype && tensor.is_floating_point() ? *dtype : tensor.scalar_type();
    views.push_back(io::TensorView{name, to_io_dtype(type, name), std::vector<int64_t>(tensor.sizes().begin(),
                                   tensor.sizes().end()), nullptr, static_cast<std::size_t>(tensor.numel()) *
                                   c10::elementSize(type)});
  }
  return views;
}

at::Tensor host_tensor(const at::Tensor& tensor, std::optional<at::ScalarType> dtype) {
  at::Tensor host = tensor.detach().to(at::kCPU);
  if (dtype && host.is_floating_point()) host = host.to(*dtype);
  return host.contiguous();
}

at::Tensor to_tensor(const io::TensorView& view) {
  at::Tensor tensor = at::empty(view.shape, at::TensorOptions().dtype(to_scalar_type(view.dtype)));
  if (view.nbytes > 0) std::memcpy(tensor.data_ptr(), view.data, view.nbytes);
  return tensor;
}

void save_tensor_file(const std::filesystem::path& path, const TensorMap& tensors) {
  const HostViews host = host_views(tensors);
  io::save_safetensors(path, host.views, {{"format", "pt"}});
}

TensorMap load_tensor_file(const std::filesystem::path& path) {
  const io::SafetensorsFile file(path);
  TensorMap out;
  for (const io::TensorView& view : file.tensors()) out.emplace(view.name, to_tensor(view));
  return out;
}

void copy_tensors_strict(const TensorMap& source, const TensorMap& target, const std::string& what) {
  std::vector<std::string> problems;
  for (const auto& [name, tensor] : target) {
    const auto it = source.find(name);
    if (it == source.end()) problems.push_back(fmt::format("missing '{}'", name));
    else if (it->second.sizes() != tensor.sizes())
      problems.push_back(fmt::format("'{}' has shape [{}], expected [{}]", name, fmt::join(it->second.sizes(), ", "),
                                     fmt::join(tensor.sizes(), ", ")));
  }
  for (const auto& [name, tensor] : source)
    if (!target.count(name)) problems.push_back(fmt::format("unexpected '{}'", name));
  HPCTRAIN_CHECK(problems.empty(), "{}: {} problem(s): {}", what, problems.size(), fmt::join(problems, "; "));
  at::NoGradGuard no_grad;
  for (const auto& [name, tensor] : target) {
    at::Tensor into = tensor;
    into.copy_(source.at(name));
  }
}

}  // namespace hpctrain::models
