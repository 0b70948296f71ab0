// Checkpoint folders and tensor files (checkpoint.hpp, Note [Complete checkpoints]).
#include "hpctrain/train/checkpoint.hpp"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <system_error>

#include "hpctrain/core/error.hpp"
#include "hpctrain/ddp/consistency.hpp"
#include "hpctrain/io/atomic_write.hpp"
#include "hpctrain/io/safetensors.hpp"

namespace hpctrain::train {
namespace {

namespace fs = std::filesystem;

constexpr const char* kPrefix = "checkpoint-";

io::DType io_dtype(at::ScalarType type, const std::string& name) {
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

at::ScalarType scalar_type(io::DType dtype) {
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

}  // namespace

std::string checkpoint_name(int64_t step) { return fmt::format("{}{}", kPrefix, step); }

std::optional<int64_t> parse_checkpoint_name(const std::string& name) {
  const std::string prefix = kPrefix;
  if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) return std::nullopt;
  const std::string digits = name.substr(prefix.size());
  if (digits.size() > 18 || !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return std::nullopt;
  return std::stoll(digits);
}

std::vector<CheckpointEntry> list_checkpoints(const fs::path& output) {
  std::vector<CheckpointEntry> found;
  if (!fs::is_directory(output)) return found;
  for (const auto& entry : fs::directory_iterator(output)) {
    const auto step = parse_checkpoint_name(entry.path().filename().string());
    if (step && entry.is_directory() && fs::is_regular_file(entry.path() / kTrainerStateName))
      found.push_back({*step, entry.path()});
  }
  std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.step < b.step; });
  return found;
}

std::optional<fs::path> latest_checkpoint(const fs::path& output) {
  const auto all = list_checkpoints(output);
  if (all.empty()) return std::nullopt;
  return all.back().path;
}

std::vector<fs::path> rotate_checkpoints(const fs::path& output, int64_t keep) {
  std::vector<fs::path> removed;
  if (keep <= 0) return removed;
  const auto all = list_checkpoints(output);
  for (std::size_t i = 0; i + static_cast<std::size_t>(keep) < all.size(); ++i) {
    io::remove_folder(all[i].path);
    removed.push_back(all[i].path);
  }
  return removed;
}

void remove_stale_temporaries(const fs::path& output) {
  if (!fs::is_directory(output)) return;
  std::vector<fs::path> stale;
  for (const auto& entry : fs::directory_iterator(output)) {
    const std::string name = entry.path().filename().string();
    const bool hidden_temp = name.rfind(".", 0) == 0 &&
                             (name.find(".tmp-") != std::string::npos || name.find(".deleting-") != std::string::npos);
    if (hidden_temp) stale.push_back(entry.path());
  }
  std::error_code error;
  for (const fs::path& path : stale) fs::remove_all(path, error);
}

void save_tensor_file(const fs::path& path, const TensorMap& tensors) {
  std::vector<at::Tensor> host;
  std::vector<io::TensorView> views;
  host.reserve(tensors.size());
  for (const auto& [name, tensor] : tensors) {
    host.push_back(tensor.detach().to(at::kCPU).contiguous());
    const at::Tensor& t = host.back();
    views.push_back(io::TensorView{name, io_dtype(t.scalar_type(), name), std::vector<int64_t>(t.sizes().begin(), t.sizes().end()),
                                   static_cast<const std::byte*>(t.data_ptr()), t.nbytes()});
  }
  io::save_safetensors(path, views, {{"format", "pt"}});
}

TensorMap load_tensor_file(const fs::path& path) {
  const io::SafetensorsFile file(path);
  TensorMap out;
  for (const io::TensorView& view : file.tensors()) {
    at::Tensor tensor = at::empty(view.shape, at::TensorOptions().dtype(scalar_type(view.dtype)));
    if (view.nbytes > 0) std::memcpy(tensor.data_ptr(), view.data, view.nbytes);
    out.emplace(view.name, std::move(tensor));
  }
  return out;
}

TensorMap broadcast_tensors(dist::Comm& comm, const TensorMap& tensors, int root) {
  std::string header;
  if (comm.rank() == root) {
    nlohmann::json entries = nlohmann::json::array();
    for (const auto& [name, tensor] : tensors)
      entries.push_back({name, static_cast<int>(tensor.scalar_type()), tensor.sizes().vec()});
    header = entries.dump();
  }
  comm.broadcast_string(header, root);
  TensorMap out;
  std::vector<at::Tensor> order;
  for (const auto& entry : nlohmann::json::parse(header)) {
    const auto name = entry[0].get<std::string>();
    const auto dtype = static_cast<at::ScalarType>(entry[1].get<int>());
    at::Tensor tensor = comm.rank() == root ? tensors.at(name).detach().to(at::kCPU).contiguous()
                                            : at::empty(entry[2].get<std::vector<int64_t>>(), at::TensorOptions().dtype(dtype));
    order.push_back(tensor);
    out.emplace(name, std::move(tensor));
  }
  ddp::broadcast_parameters(comm, order, root);
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

void write_text(const fs::path& path, const std::string& contents) {
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  HPCTRAIN_CHECK(file.good(), "cannot create '{}': {}", path.string(), std::strerror(errno));
  file.write(contents.data(), static_cast<std::streamsize>(contents.size()));
  file.close();
  HPCTRAIN_CHECK(!file.fail(), "cannot write '{}': {}", path.string(), std::strerror(errno));
}

std::string read_text(const fs::path& path) {
  std::ifstream file(path, std::ios::binary);
  HPCTRAIN_CHECK(file.good(), "cannot open '{}': {}", path.string(), std::strerror(errno));
  return std::string(std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>());
}

}  // namespace hpctrain::train
