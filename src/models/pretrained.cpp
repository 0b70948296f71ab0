// from_pretrained / save_pretrained (pretrained.hpp): the bridge between io/ (bytes) and models (tensors).
#include "hpctrain/models/pretrained.hpp"

#include "hpctrain/core/error.hpp"
#include "hpctrain/core/memory_info.hpp"
#include "hpctrain/io/atomic_write.hpp"
#include "hpctrain/io/safetensors.hpp"
#include "hpctrain/models/materialize.hpp"
#include "hpctrain/models/registry.hpp"
#include "hpctrain/models/tensor_io.hpp"

#include <ATen/ATen.h>

#include <system_error>

namespace hpctrain::models {

namespace fs = std::filesystem;

namespace {

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
io::HfConfig config_to_save(const Model& model, at::ScalarType dtype) {
  io::HfConfig config = model.config();
  config.common.architectures = {model.spec().architecture};
  config.common.dtype = torch_dtype_name(dtype);
  return config;
}

}  // namespace

StateDict read_weights(const fs::path& dir) {
  try {
    const io::SafetensorsCheckpoint checkpoint = io::SafetensorsCheckpoint::open(dir);
    StateDict out;
    for (const auto& [name, view] : checkpoint.tensors()) {
      out.emplace(name, to_tensor(*view));
    }
    return out;
  } catch (const std::exception& error) {  // the files may hold more than the model (unexpected tensors)
    if (!core::is_allocation_failure(error)) throw;
    fail("{}: reading the weights {}", dir.string(), core::describe_allocation_failure(error));
  }
}

MappedWeights map_weights(const fs::path& dir) {
  MappedWeights out;
  out.files = std::make_shared<const io::SafetensorsCheckpoint>(io::SafetensorsCheckpoint::open(dir));
  for (const auto& [name, view] : out.files->tensors()) {
    const at::ScalarType type = to_scalar_type(view->dtype);
    const bool aligned = reinterpret_cast<std::uintptr_t>(view->data) % c10::elementSize(type) == 0;
    out.tensors.emplace(name, aligned ? at::from_blob(const_cast<std::byte*>(view->data), view->shape,
                                                      at::TensorOptions().dtype(type))
                                      : to_tensor(*view));
  }
  return out;
}

LoadReport defer_pretrained_weights(Model& model, const fs::path& dir, bool drop_resized,
                                    const std::function<void(const at::Tensor&, const std::string&)>& check) {
  HPCTRAIN_CHECK(model.deferred_seed().has_value(), "defer_pretrained_weights: {} was not built with deferred "
                 "parameters", model.name());
  MappedWeights mapped = map_weights(dir);
  if (drop_resized) drop_resized_head(model, mapped.tensors);
  LoadPlan plan = plan_load_state_dict(model, mapped.tensors, dir.string());
  auto deferred = std::make_shared<Model::DeferredValues>();
  deferred->source = mapped.files;
  // A value is read twice (checked here, copied when materialized): the file's pages leave the resident set after
  // each, so that a rank that builds part by part never holds the whole file (Note [Quantized at load]).
  deferred->release = [files = mapped.files](const at::Tensor& value) {
    (void)files->drop_pages(value.data_ptr(), value.nbytes());
  };
  const StateDict own = state_dict(model);
  at::NoGradGuard no_grad;
  for (auto& [key, value] : plan.values) {
    if (check) check(value, key);
    deferred->release(value);
    at::Tensor target = own.at(key);
    if (is_deferred(target)) deferred->values.emplace(key, std::move(value));
    else target.copy_(value);  // buffers, and what holds memory already
  }
  model.set_deferred_values(std::move(deferred));
  return std::move(plan.report);
}

Pretrained from_pretrained(const fs::path& dir) {
  Pretrained out;
  out.model = from_config(io::HfConfig::load(dir));
  out.report = load_state_dict(*out.model, read_weights(dir), dir.string());
  return out;
}

Loaded<CausalLM> causal_lm_from_pretrained(const fs::path& dir) {
  Loaded<CausalLM> out;
  out.model = causal_lm_from_config(io::HfConfig::load(dir));
  out.report = load_state_dict(*out.model, read_weights(dir), dir.string());
  return out;
}

Loaded<Model> load_pretrained(const fs::path& dir) {
  Loaded<Model> out;
  out.model = build_model(io::HfConfig::load(dir));
  out.report = load_state_dict(*out.model, read_weights(dir), dir.string());
  return out;
}

std::vector<io::TensorView> pretrained_layout(const Model& model, std::optional<at::ScalarType> save_dtype) {
  std::vector<io::TensorView> views = layout_views(state_dict(model), save_dtype);
  HPCTRAIN_CHECK(!views.empty(), "save_pretrained: the model has no parameters");
  return views;
}

void write_pretrained_files(const Model& model, const fs::path& dir, const std::vector<fs::path>& tokenizer_files,
                            std::optional<at::ScalarType> save_dtype, const io::TensorData& data) {
  const std::vector<io::TensorView> views = pretrained_layout(model, save_dtype);
  io::save_sharded(dir, views, {{"format", "pt"}}, io::kDefaultMaxShardBytes, data);
  config_to_save(model, to_scalar_type(views.front().dtype)).save(dir / "config.json");
  for (const fs::path& file : tokenizer_files) {
    HPCTRAIN_CHECK(fs::is_regular_file(file), "save_pretrained: tokenizer file '{}' does not exist", file.string());
    fs::copy_file(file, dir / file.filename(), fs::copy_options::overwrite_existing);
  }
}

void write_pretrained_files(const Model& model, const fs::path& dir,
                            const std::vector<fs::path>& tokenizer_files, std::optional<at::ScalarType> save_dtype) {
  std::vector<at::Tensor> host;  // the tensor data(i) points into, kept until the next call
  const StateDict tensors = state_dict(model);
  std::vector<at::Tensor> ordered;
  for (const auto& [name, tensor] : tensors) ordered.push_back(tensor);
  write_pretrained_files(model, dir, tokenizer_files, save_dtype, [&](std::size_t i) {
    host = {host_tensor(ordered.at(i), save_dtype)};
    return static_cast<const std::byte*>(host.front().data_ptr());
  });
}

void save_pretrained(const Model& model, const fs::path& dir, const std::vector<fs::path>& tokenizer_files,
                     std::optional<at::ScalarType> save_dtype, const io::TensorData& data) {
  if (fs::exists(dir)) {
    HPCTRAIN_CHECK(fs::is_directory(dir) && (fs::is_empty(dir) || fs::exists(dir / "config.json")),
                   "save_pretrained: refusing to replace '{}': it exists and is not a model folder (no config.json)",
                   dir.string());
  }
  io::write_folder_atomically(dir, [&](const fs::path& tmp) {
    if (data) write_pretrained_files(model, tmp, tokenizer_files, save_dtype, data);
    else write_pretrained_files(model, tmp, tokenizer_files, save_dtype);
  });
}

void save_pretrained(const Model& model, const fs::path& dir,
                     const std::vector<fs::path>& tokenizer_files, std::optional<at::ScalarType> save_dtype) {
  save_pretrained(model, dir, tokenizer_files, save_dtype, io::TensorData{});
}

}  // namespace hpctrain::models
