// from_pretrained / save_pretrained (pretrained.hpp): the bridge between io/ (bytes) and models (tensors).
#include "hpctrain/models/pretrained.hpp"

#include "hpctrain/core/error.hpp"
#include "hpctrain/io/atomic_write.hpp"
#include "hpctrain/io/safetensors.hpp"
#include "hpctrain/models/registry.hpp"

#include <ATen/ATen.h>

#include <cstring>
#include <system_error>

namespace hpctrain::models {

namespace fs = std::filesystem;

namespace {

at::ScalarType scalar_type_of(io::DType dtype) {
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

io::DType dtype_of(at::ScalarType type, const std::string& name) {
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

// transformers' config.json torch_dtype spelling.
std::string torch_dtype_name(at::ScalarType type) {
  switch (type) {
    case at::kFloat: return "float32";
    case at::kHalf: return "float16";
    case at::kBFloat16: return "bfloat16";
    case at::kDouble: return "float64";
    default: return c10::toString(type);
  }
}

// The config transformers writes next to these weights: the architecture and their dtype; labels,
// model_type and unknown keys as the model's config has them (HfConfig::to_json).
io::HfConfig config_to_save(const SequenceClassifier& model, at::ScalarType dtype) {
  io::HfConfig config = model.config();
  config.common.architectures = {model.spec().architecture};
  config.common.dtype = torch_dtype_name(dtype);
  return config;
}

}  // namespace

StateDict read_weights(const fs::path& dir) {
  const io::SafetensorsCheckpoint checkpoint = io::SafetensorsCheckpoint::open(dir);
  StateDict out;
  for (const auto& [name, view] : checkpoint.tensors()) {
    at::Tensor tensor = at::empty(view->shape, at::TensorOptions().dtype(scalar_type_of(view->dtype)));
    // Safetensors data is little-endian and may be unaligned: copy bytes (hosts are little-endian).
    if (view->nbytes > 0) std::memcpy(tensor.data_ptr(), view->data, view->nbytes);
    out.emplace(name, std::move(tensor));
  }
  return out;
}

Pretrained from_pretrained(const fs::path& dir) {
  Pretrained out;
  out.model = from_config(io::HfConfig::load(dir));
  out.report = load_state_dict(*out.model, read_weights(dir), dir.string());
  return out;
}

void write_pretrained_files(const SequenceClassifier& model, const fs::path& dir,
                            const std::vector<fs::path>& tokenizer_files) {
  // CPU, contiguous copies that stay alive while the views point into them.
  const StateDict tensors = state_dict(model);
  HPCTRAIN_CHECK(!tensors.empty(), "save_pretrained: the model has no parameters");
  std::vector<at::Tensor> host;
  std::vector<io::TensorView> views;
  host.reserve(tensors.size());
  for (const auto& [name, tensor] : tensors) {
    host.push_back(tensor.detach().to(at::kCPU).contiguous());
    const at::Tensor& t = host.back();
    views.push_back(io::TensorView{name, dtype_of(t.scalar_type(), name),
                                   std::vector<int64_t>(t.sizes().begin(), t.sizes().end()),
                                   static_cast<const std::byte*>(t.data_ptr()), t.nbytes()});
  }

  io::save_sharded(dir, views, {{"format", "pt"}});
  config_to_save(model, host.front().scalar_type()).save(dir / "config.json");
  for (const fs::path& file : tokenizer_files) {
    HPCTRAIN_CHECK(fs::is_regular_file(file), "save_pretrained: tokenizer file '{}' does not exist", file.string());
    fs::copy_file(file, dir / file.filename(), fs::copy_options::overwrite_existing);
  }
}

void save_pretrained(const SequenceClassifier& model, const fs::path& dir,
                     const std::vector<fs::path>& tokenizer_files) {
  if (fs::exists(dir)) {
    HPCTRAIN_CHECK(fs::is_directory(dir) && (fs::is_empty(dir) || fs::exists(dir / "config.json")),
                   "save_pretrained: refusing to replace '{}': it exists and is not a model folder (no config.json)",
                   dir.string());
  }
  io::write_folder_atomically(dir, [&](const fs::path& tmp) { write_pretrained_files(model, tmp, tokenizer_files); });
}

}  // namespace hpctrain::models
