// LoRA adapters on the models' linear layers, and PEFT's adapter folders (lora.hpp, Note [LoRA]).
#include "hpctrain/models/lora.hpp"

#include "hpctrain/core/error.hpp"
#include "hpctrain/io/atomic_write.hpp"
#include "hpctrain/io/json_text.hpp"
#include "hpctrain/models/causal_lm.hpp"
#include "hpctrain/models/tensor_io.hpp"
#include "models/dropout.hpp"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/nn/init.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iterator>
#include <set>

namespace hpctrain::models {
namespace {

namespace fs = std::filesystem;

constexpr const char* kAllLinear = "all-linear";
constexpr const char* kPeftPrefix = "base_model.model.";

bool name_ends_with(const std::string& name, const std::string& tail) {
  return name.size() >= tail.size() && name.compare(name.size() - tail.size(), tail.size(), tail) == 0;
}

// PEFT's target rule: the full name, or a suffix at a module boundary.
bool is_lora_target(const std::string& name, const std::string& key) {
  return name == key || name_ends_with(name, "." + key);
}

// PEFT's modules_to_save rule (_set_trainable): a plain suffix ("classifier" matches "pre_classifier").
bool is_module_to_save(const std::string& name, const std::vector<std::string>& keys) {
  return std::any_of(keys.begin(), keys.end(), [&](const std::string& key) { return name_ends_with(name, key); });
}

std::string short_name(const std::string& name) {
  const auto dot = name.rfind('.');
  return dot == std::string::npos ? name : name.substr(dot + 1);
}

std::vector<std::pair<std::string, LoraTarget*>> lora_layers(Model& model) {
  std::vector<std::pair<std::string, LoraTarget*>> out;
  for (const auto& item : model.named_modules("", /*include_self=*/false))
    if (auto* target = dynamic_cast<LoraTarget*>(item.value().get())) out.emplace_back(item.key(), target);
  return out;
}

// PEFT's all-linear leaves out a generation model's output layer (get_output_embeddings()): a causal LM's lm_head,
// which an explicit --lora-target-modules lm_head still adapts (Note [LM head]).
bool is_output_layer(const Model& model, const std::string& name) {
  return name == "lm_head" && dynamic_cast<const CausalLM*>(&model) != nullptr;
}

// The layers config.target_modules names; "all-linear" is resolved into their full names (as peft saves it).
std::vector<std::pair<std::string, LoraTarget*>> resolve_targets(Model& model, LoraConfig& config) {
  const auto layers = lora_layers(model);
  std::vector<std::pair<std::string, LoraTarget*>> chosen;
  if (config.target_modules == std::vector<std::string>{kAllLinear}) {
    const std::vector<std::string> heads = default_modules_to_save(config.task_type);
    config.target_modules.clear();
    for (const auto& [name, layer] : layers) {
      if (is_module_to_save(name, config.modules_to_save) || is_module_to_save(name, heads) || is_output_layer(model, name))
        continue;
      chosen.emplace_back(name, layer);
      config.target_modules.push_back(name);
    }
    return chosen;
  }
  for (const std::string& key : config.target_modules) {
    const auto before = chosen.size();
    for (const auto& [name, layer] : layers)
      if (is_lora_target(name, key)) chosen.emplace_back(name, layer);
    HPCTRAIN_CHECK(chosen.size() > before,
                   "--lora-target-modules: '{}' names no linear module of {}; its linear modules are: {} (or all-linear)",
                   key, model.spec().architecture, fmt::join(linear_module_names(model), ", "));
  }
  std::sort(chosen.begin(), chosen.end());
  chosen.erase(std::unique(chosen.begin(), chosen.end()), chosen.end());
  return chosen;
}

std::vector<std::string> string_list(const nlohmann::json& value, const std::string& field, const std::string& source) {
  if (value.is_null()) return {};
  HPCTRAIN_CHECK(value.is_array(), "{}: \"{}\" must be a list of module names{}", source, field,
                 value.is_string() ? " (a regular expression is not supported)" : "");
  std::vector<std::string> out;
  for (const auto& item : value) out.push_back(item.get<std::string>());
  return out;
}

}  // namespace

double LoraConfig::scaling() const {
  return use_rslora ? alpha / std::sqrt(static_cast<double>(r)) : alpha / static_cast<double>(r);
}

nlohmann::json LoraConfig::to_peft_json() const {
  nlohmann::json modules = modules_to_save.empty() ? nlohmann::json(nullptr) : nlohmann::json(modules_to_save);
  return {{"peft_type", "LORA"},
          {"task_type", task_type},
          {"base_model_name_or_path", base_model_name_or_path.empty() ? nlohmann::json(nullptr) : nlohmann::json(base_model_name_or_path)},
          {"r", r},
          {"lora_alpha", alpha},
          {"lora_dropout", dropout},
          {"target_modules", target_modules},
          {"modules_to_save", modules},
          {"bias", "none"},
          {"fan_in_fan_out", fan_in_fan_out},
          {"use_rslora", use_rslora},
          {"use_dora", false},
          {"init_lora_weights", true},
          {"inference_mode", true},
          {"rank_pattern", nlohmann::json::object()},
          {"alpha_pattern", nlohmann::json::object()},
          {"layers_to_transform", nullptr},
          {"layers_pattern", nullptr},
          {"revision", nullptr},
          {"auto_mapping", nullptr},
          {"lora_bias", false},
          {"exclude_modules", nullptr}};
}

LoraConfig LoraConfig::from_peft_json(const nlohmann::json& json, const std::string& source) {
  HPCTRAIN_CHECK(json.is_object() && json.value("peft_type", "") == "LORA", "{}: peft_type \"{}\": hpctrain loads LORA adapters only",
                 source, json.is_object() ? json.value("peft_type", "") : "");
  const auto flag = [&](const char* key) { return json.contains(key) && json[key].is_boolean() && json[key].get<bool>(); };
  HPCTRAIN_CHECK(!flag("use_dora"), "{}: use_dora: DoRA adapters are not supported", source);
  HPCTRAIN_CHECK(json.value("bias", std::string("none")) == "none", "{}: bias \"{}\": only \"none\" is supported", source,
                 json.value("bias", std::string()));
  for (const char* key : {"rank_pattern", "alpha_pattern"})
    HPCTRAIN_CHECK(!json.contains(key) || json[key].is_null() || json[key].empty(), "{}: {} is not supported (one r and alpha for all layers)",
                   source, key);
  HPCTRAIN_CHECK(!json.contains("layers_to_transform") || json["layers_to_transform"].is_null(),
                 "{}: layers_to_transform is not supported", source);
  LoraConfig config;
  config.r = json.at("r").get<int64_t>();
  config.alpha = json.value("lora_alpha", 8.0);
  config.dropout = json.value("lora_dropout", 0.0);
  config.use_rslora = flag("use_rslora");
  config.target_modules = string_list(json.value("target_modules", nlohmann::json()), "target_modules", source);
  config.modules_to_save = string_list(json.value("modules_to_save", nlohmann::json()), "modules_to_save", source);
  if (json.contains("task_type") && json["task_type"].is_string()) config.task_type = json["task_type"].get<std::string>();
  if (json.contains("base_model_name_or_path") && json["base_model_name_or_path"].is_string())
    config.base_model_name_or_path = json["base_model_name_or_path"].get<std::string>();
  HPCTRAIN_CHECK(config.r > 0 && !config.target_modules.empty(), "{}: expected r > 0 and a target_modules list", source);
  return config;
}

void LoraTarget::attach_lora(int64_t r, double scaling, double dropout) {
  HPCTRAIN_CHECK(!has_lora(), "LoRA: {} already carries an adapter", as_module().name());
  torch::nn::Module& self = as_module();
  lora_.lora_A = self.register_module("lora_A", torch::nn::Linear(torch::nn::LinearOptions(in_features(), r).bias(false)));
  lora_.lora_B = self.register_module("lora_B", torch::nn::Linear(torch::nn::LinearOptions(r, out_features()).bias(false)));
  at::NoGradGuard no_grad;
  torch::nn::init::kaiming_uniform_(lora_.lora_A->weight, std::sqrt(5.0));  // PEFT's reset_lora_parameters
  lora_.lora_B->weight.zero_();
  const at::Tensor& base = base_weight();
  lora_.lora_A->to(base.device(), base.scalar_type());
  lora_.lora_B->to(base.device(), base.scalar_type());
  lora_.scaling = scaling, lora_.dropout = dropout;
}

void LoraTarget::merge_lora() {
  if (!has_lora()) return;
  {
    at::NoGradGuard no_grad;
    at::Tensor delta = at::matmul(lora_.lora_B->weight.to(at::kFloat), lora_.lora_A->weight.to(at::kFloat)) * lora_.scaling;
    if (fan_in_fan_out()) delta = delta.t();
    at::Tensor& weight = base_weight();
    weight.add_(delta.to(weight.scalar_type()));
  }
  as_module().unregister_module("lora_A");
  as_module().unregister_module("lora_B");
  lora_ = LoraBranch{};
}

at::Tensor LoraTarget::with_lora(const at::Tensor& base_output, const at::Tensor& x, bool training) const {
  if (!has_lora()) return base_output;
  const at::Tensor dropped = detail::seeded_dropout(x, lora_.dropout, training);
  return base_output + at::linear(at::linear(dropped, lora_.lora_A->weight), lora_.lora_B->weight) * lora_.scaling;
}

LoraTarget::LowRank LoraTarget::lora_factors(const at::Tensor& x, bool training) const {
  if (!has_lora()) return {};
  return {at::linear(detail::seeded_dropout(x, lora_.dropout, training), lora_.lora_A->weight),
          lora_.lora_B->weight * lora_.scaling};
}

at::Tensor LoraLinearImpl::forward(const at::Tensor& x) {
  return with_lora(torch::nn::LinearImpl::forward(x), x, is_training());
}

std::string LoraLayout::summary() const {
  return fmt::format("LoRA: adapters on {} layers, modules to save: {}; {} of {} parameters train ({:.3f} %)",
                     adapted.size(), saved_modules.empty() ? "none" : fmt::format("{}", fmt::join(saved_modules, ", ")),
                     trainable_parameters, total_parameters,
                     total_parameters > 0 ? 100.0 * static_cast<double>(trainable_parameters) / static_cast<double>(total_parameters) : 0.0);
}

std::vector<std::string> default_lora_targets(const std::string& model_type) {
  if (model_type == "distilbert") return {"q_lin", "v_lin"};
  if (model_type == "bert") return {"query", "value"};
  if (model_type == "gpt2") return {"c_attn"};
  if (model_type == "llama" || model_type == "qwen2") return {"q_proj", "v_proj"};
  fail("LoRA: no default target modules for model type '{}'; give --lora-target-modules", model_type);
}

std::string lora_task_type(const Model& model) {
  if (dynamic_cast<const CausalLM*>(&model) != nullptr) return "CAUSAL_LM";
  return "SEQ_CLS";
}

std::vector<std::string> default_modules_to_save(const std::string& task_type) {
  if (task_type == "SEQ_CLS") return {"classifier", "score"};  // peft's PeftModelForSequenceClassification
  return {};
}

std::vector<std::string> linear_module_names(Model& model) {
  std::vector<std::string> names;
  for (const auto& [name, layer] : lora_layers(model)) {
    const std::string tail = short_name(name);
    if (std::find(names.begin(), names.end(), tail) == names.end()) names.push_back(tail);
  }
  return names;
}

LoraLayout apply_lora(Model& model, LoraConfig& config) {
  HPCTRAIN_CHECK(config.r > 0, "--lora-r {}: expected > 0", config.r);
  HPCTRAIN_CHECK(config.dropout >= 0 && config.dropout < 1, "--lora-dropout {}: expected in [0, 1)", config.dropout);
  if (config.task_type.empty()) config.task_type = lora_task_type(model);
  if (config.target_modules.empty()) config.target_modules = default_lora_targets(model.spec().model_type);
  HPCTRAIN_CHECK(!lora_layers(model).empty(), "LoRA: {} has no linear layers that can carry an adapter",
                 model.spec().architecture);
  const auto targets = resolve_targets(model, config);
  for (auto& param : model.parameters()) param.set_requires_grad(false);
  LoraLayout layout;
  config.fan_in_fan_out = std::all_of(targets.begin(), targets.end(), [](const auto& t) { return t.second->fan_in_fan_out(); });
  for (const auto& [name, layer] : targets) {
    layer->attach_lora(config.r, config.scaling(), config.dropout);
    layout.adapted.push_back(name);
  }
  for (const auto& item : model.named_modules("", /*include_self=*/false)) {
    if (!is_module_to_save(item.key(), config.modules_to_save)) continue;
    for (auto& param : item.value()->parameters()) param.set_requires_grad(true);
    layout.saved_modules.push_back(item.key());
  }
  for (const auto& param : model.parameters()) {
    layout.total_parameters += param.numel();
    if (param.requires_grad()) layout.trainable_parameters += param.numel();
  }
  return layout;
}

StateDict adapter_state_dict(const Model& model) {
  StateDict out;
  for (const auto& item : model.named_parameters())
    if (item.value().requires_grad()) out.emplace(kPeftPrefix + item.key(), item.value());
  return out;
}

void load_adapter_state_dict(Model& model, const StateDict& tensors, const std::string& source) {
  const StateDict own = adapter_state_dict(model);
  copy_tensors_strict(TensorMap(tensors.begin(), tensors.end()), TensorMap(own.begin(), own.end()),
                      fmt::format("adapter tensors in '{}'", source));
}

void merge_lora(Model& model) {
  for (const auto& [name, layer] : lora_layers(model)) layer->merge_lora();
}

void write_adapter_files(const Model& model, const LoraConfig& config, const fs::path& dir) {
  io::write_file_atomically(dir / kAdapterConfigName, config.to_peft_json().dump(2) + "\n");
  const StateDict tensors = adapter_state_dict(model);
  save_tensor_file(dir / kAdapterWeightsName, TensorMap(tensors.begin(), tensors.end()));
}

LoraConfig read_adapter_config(const fs::path& dir) {
  const fs::path file = dir / kAdapterConfigName;
  std::ifstream in(file, std::ios::binary);
  HPCTRAIN_CHECK(in.good(), "'{}': no {} (an adapter folder in PEFT's format has it)", dir.string(), kAdapterConfigName);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return LoraConfig::from_peft_json(io::parse_json_text(text, file.string()), file.string());
}

LoraConfig load_adapter(Model& model, const fs::path& dir) {
  LoraConfig config = read_adapter_config(dir);
  const std::string task = lora_task_type(model);
  HPCTRAIN_CHECK(config.task_type.empty() || config.task_type == task, "'{}': task_type {} but {} is a {} model", dir.string(),
                 config.task_type, model.spec().architecture, task);
  (void)apply_lora(model, config);
  const TensorMap tensors = load_tensor_file(dir / kAdapterWeightsName);
  load_adapter_state_dict(model, StateDict(tensors.begin(), tensors.end()), (dir / kAdapterWeightsName).string());
  return config;
}

}  // namespace hpctrain::models
