// LoRA adapters on the models' linear layers, and PEFT's adapter folders (lora.hpp, Note [LoRA]).
#include "hpctrain/models/lora.hpp"

#include "hpctrain/core/error.hpp"
#include "hpctrain/core/memory_info.hpp"
#include "hpctrain/io/atomic_write.hpp"
#include "hpctrain/io/json_text.hpp"
#include "hpctrain/models/causal_lm.hpp"
#include "hpctrain/models/quantized_linear.hpp"
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
#include <map>
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
                   "{}: '{}' names no linear module of {}; its linear modules are: {} (or all-linear)",
                   config.field("target_modules"), key, model.spec().architecture,
                   fmt::join(linear_module_names(model), ", "));
  }
  std::sort(chosen.begin(), chosen.end());
  chosen.erase(std::unique(chosen.begin(), chosen.end()), chosen.end());
  return chosen;
}

std::vector<std::string> string_list(const nlohmann::json& value, const std::string& field, const std::string& source) {
  if (value.is_null()) return {};
  HPCTRAIN_CHECK(value.is_array(), "{}: field '{}' must be a list of module names, got {} {}{}", source, field,
                 value.type_name(), value.dump(), value.is_string() ? " (a regular expression is not supported)" : "");
  std::vector<std::string> out;
  for (const auto& item : value) {
    HPCTRAIN_CHECK(item.is_string() && !item.get<std::string>().empty(), "{}: field '{}': expected module names, got {} "
                   "{} in the list", source, field, item.type_name(), item.dump());
    out.push_back(item.get<std::string>());
  }
  return out;
}

// The adapters' bytes (lora_A and lora_B of every target, the base weights' dtype) against the memory this process
// may still allocate: an absurd r is refused before anything is allocated, naming r and where it came from.
void check_adapter_size(const std::vector<std::pair<std::string, LoraTarget*>>& targets, const LoraConfig& config) {
  const auto memory = core::available_host_memory();
  if (!memory) return;
  double bytes = 0;  // r <= kMostLoraRank and the layers exist: no overflow in double
  for (const auto& [name, layer] : targets)
    bytes += static_cast<double>(config.r) * static_cast<double>(layer->in_features() + layer->out_features()) *
             static_cast<double>(layer->base_weight().element_size());
  HPCTRAIN_CHECK(bytes <= static_cast<double>(memory->bytes), "{} {}: the adapters of {} layer(s) would take {:.3g} "
                 "GiB, but {} are available ({})", config.field("r"), config.r, targets.size(), bytes / (1 << 30),
                 core::format_bytes(memory->bytes), memory->source);
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

// Note [Adapter config checks]
// adapter_config.json is user input like config.json: every field hpctrain reads is checked for its type and range
// before anything is built, and the error names the file and the field, what was expected and what was found
// ("r" a string or missing, "lora_alpha" not a number, "lora_dropout" outside [0, 1), "target_modules" not a
// list of names, an r beyond kMostLoraRank refused before any allocation). A LoraConfig remembers where it came
// from (origin): apply_lora's errors then name the file's fields, never --lora-* options the user did not give.
LoraConfig LoraConfig::from_peft_json(const nlohmann::json& json, const std::string& source) {
  HPCTRAIN_CHECK(json.is_object(), "{}: expected a JSON object (adapter_config.json as peft writes it), got {}", source,
                 json.type_name());
  const auto text = [&](const char* key) -> std::string {
    const auto it = json.find(key);
    if (it == json.end() || it->is_null()) return "";
    HPCTRAIN_CHECK(it->is_string(), "{}: field '{}': expected a string, got {} {}", source, key, it->type_name(), it->dump());
    return it->get<std::string>();
  };
  HPCTRAIN_CHECK(text("peft_type") == "LORA", "{}: field 'peft_type' \"{}\": hpctrain loads LORA adapters only", source,
                 text("peft_type"));
  const auto flag = [&](const char* key) {
    const auto it = json.find(key);
    if (it == json.end() || it->is_null()) return false;
    HPCTRAIN_CHECK(it->is_boolean(), "{}: field '{}': expected true or false, got {} {}", source, key, it->type_name(),
                   it->dump());
    return it->get<bool>();
  };
  const auto number = [&](const char* key, double fallback) {
    const auto it = json.find(key);
    if (it == json.end()) return fallback;
    HPCTRAIN_CHECK(it->is_number() && std::isfinite(it->get<double>()), "{}: field '{}': expected a finite number, got "
                   "{} {}", source, key, it->type_name(), it->dump());
    return it->get<double>();
  };
  HPCTRAIN_CHECK(!flag("use_dora"), "{}: use_dora: DoRA adapters are not supported", source);
  const std::string bias = text("bias");
  HPCTRAIN_CHECK(bias.empty() || bias == "none", "{}: field 'bias' \"{}\": only \"none\" is supported", source, bias);
  for (const char* key : {"rank_pattern", "alpha_pattern"})
    HPCTRAIN_CHECK(!json.contains(key) || json[key].is_null() || json[key].empty(), "{}: {} is not supported (one r and alpha for all layers)",
                   source, key);
  HPCTRAIN_CHECK(!json.contains("layers_to_transform") || json["layers_to_transform"].is_null(),
                 "{}: layers_to_transform is not supported", source);
  const auto r = json.find("r");
  HPCTRAIN_CHECK(r != json.end() && r->is_number_integer(), "{}: field 'r': expected the adapter's rank, an integer "
                 "from 1 to {}, got {}", source, kMostLoraRank,
                 r == json.end() ? std::string("nothing (missing)") : fmt::format("{} {}", r->type_name(), r->dump()));
  LoraConfig config;
  config.origin = source;
  config.r = r->get<int64_t>();
  config.alpha = number("lora_alpha", 8.0);
  config.dropout = number("lora_dropout", 0.0);
  config.use_rslora = flag("use_rslora");
  config.target_modules = string_list(json.value("target_modules", nlohmann::json()), "target_modules", source);
  config.modules_to_save = string_list(json.value("modules_to_save", nlohmann::json()), "modules_to_save", source);
  config.task_type = text("task_type");
  if (json.contains("base_model_name_or_path") && json["base_model_name_or_path"].is_string())
    config.base_model_name_or_path = json["base_model_name_or_path"].get<std::string>();
  HPCTRAIN_CHECK(!config.target_modules.empty(), "{}: field 'target_modules': expected a list of module names, got "
                 "{}", source, json.contains("target_modules") ? json["target_modules"].dump() : "nothing (missing)");
  check_lora_config(config);
  return config;
}

int64_t LoraTarget::in_features() const { return quantized_ ? quantized_->shape()[1] : stored_in_features(); }
int64_t LoraTarget::out_features() const { return quantized_ ? quantized_->shape()[0] : stored_out_features(); }

void LoraTarget::quantize_base(const Quant4Options& options, const std::string& name) {
  HPCTRAIN_CHECK(!quantized_, "--quantize-base: '{}' is quantized already", name);
  at::Tensor& weight = base_weight();
  HPCTRAIN_CHECK(!weight.requires_grad(), "--quantize-base: '{}' trains (a module to save): only frozen weights are "
                 "quantized", name);
  // transformers' Bnb4bitQuantize quantizes a Conv1D weight transposed, [out, in] (Note [Quantized base])
  quantized_ = hold_4bit(as_module(), weight, fan_in_fan_out() ? weight.t() : weight, options, name);
}

void LoraTarget::dequantize_base() {
  if (!quantized_) return;
  restore_from_4bit(as_module(), base_weight(), quantized_->weight(), fan_in_fan_out());
  quantized_ = nullptr;
}

Quant4Weight LoraTarget::quantized_base() const {
  HPCTRAIN_CHECK(quantized_ != nullptr, "LoRA: the layer's base is not quantized");
  return quantized_->weight();
}

at::Tensor LoraTarget::quantized_base_output(const at::Tensor& x, const at::Tensor& bias) const {
  return quantized_linear(x, quantized_base(), bias);
}

std::string LoraConfig::field(const char* name) const {
  static const std::map<std::string, std::string> kOptions = {{"r", "--lora-r"}, {"lora_alpha", "--lora-alpha"},
                                                              {"lora_dropout", "--lora-dropout"},
                                                              {"target_modules", "--lora-target-modules"}};
  if (origin.empty()) return kOptions.at(name);
  return fmt::format("{}: field '{}'", origin, name);
}

void check_lora_config(const LoraConfig& config) {
  HPCTRAIN_CHECK(config.r >= 1 && config.r <= kMostLoraRank, "{} {}: expected the adapter's rank, an integer from 1 to {}",
                 config.field("r"), config.r, kMostLoraRank);
  HPCTRAIN_CHECK(std::isfinite(config.alpha) && config.alpha > 0, "{} {}: expected a finite number > 0",
                 config.field("lora_alpha"), config.alpha);
  HPCTRAIN_CHECK(std::isfinite(config.dropout) && config.dropout >= 0 && config.dropout < 1,
                 "{} {}: expected a probability in [0, 1)", config.field("lora_dropout"), config.dropout);
}

void LoraTarget::attach_lora(int64_t r, double scaling, double dropout) {
  HPCTRAIN_CHECK(!has_lora(), "LoRA: {} already carries an adapter", as_module().name());
  torch::nn::Module& self = as_module();
  lora_.lora_A = self.register_module("lora_A", torch::nn::Linear(torch::nn::LinearOptions(in_features(), r).bias(false)));
  lora_.lora_B = self.register_module("lora_B", torch::nn::Linear(torch::nn::LinearOptions(r, out_features()).bias(false)));
  at::NoGradGuard no_grad;
  torch::nn::init::kaiming_uniform_(lora_.lora_A->weight, std::sqrt(5.0));  // PEFT's reset_lora_parameters
  lora_.lora_B->weight.zero_();
  const at::Tensor& base = base_weight();  // a quantized base: float32 adapters on its device
  lora_.lora_A->to(base.device(), quantized_ ? at::kFloat : base.scalar_type());
  lora_.lora_B->to(base.device(), quantized_ ? at::kFloat : base.scalar_type());
  lora_.scaling = scaling, lora_.dropout = dropout;
}

void LoraTarget::merge_lora() {
  if (!has_lora()) return;
  dequantize_base();  // Note [Quantized base]: the merged weight is the dequantized one plus the adapter's delta
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
  // The scaling goes into B ([out, r]), not onto the product ([tokens, out]): one pass over the layer's output fewer
  // in the forward and in the backward, as the LM head's factors already do (lora_factors).
  return base_output + at::linear(at::linear(dropped, lora_.lora_A->weight), lora_.lora_B->weight * lora_.scaling);
}

LoraTarget::LowRank LoraTarget::lora_factors(const at::Tensor& x, bool training) const {
  if (!has_lora()) return {};
  return {at::linear(detail::seeded_dropout(x, lora_.dropout, training), lora_.lora_A->weight),
          lora_.lora_B->weight * lora_.scaling};
}

at::Tensor LoraLinearImpl::forward(const at::Tensor& x) {
  if (base_quantized()) return with_lora(quantized_base_output(x, bias), x, is_training());
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

std::vector<std::pair<std::string, LoraTarget*>> lora_target_layers(Model& model) { return lora_layers(model); }

std::vector<std::string> linear_module_names(Model& model) {
  std::vector<std::string> names;
  for (const auto& [name, layer] : lora_layers(model)) {
    const std::string tail = short_name(name);
    if (std::find(names.begin(), names.end(), tail) == names.end()) names.push_back(tail);
  }
  return names;
}

LoraLayout apply_lora(Model& model, LoraConfig& config) {
  check_lora_config(config);
  if (config.task_type.empty()) config.task_type = lora_task_type(model);
  if (config.target_modules.empty()) config.target_modules = default_lora_targets(model.spec().model_type);
  HPCTRAIN_CHECK(!lora_layers(model).empty(), "LoRA: {} has no linear layers that can carry an adapter",
                 model.spec().architecture);
  const auto targets = resolve_targets(model, config);
  check_adapter_size(targets, config);
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
  for (const auto& [name, tensor] : own) {  // named with the adapter's file, not the base folder
    const int64_t bad = tensor.numel() - at::isfinite(tensor.detach()).sum().item<int64_t>();
    HPCTRAIN_CHECK(bad == 0, "'{}': tensor '{}' holds {} NaN/Inf value(s) of {}: the adapter is corrupt (a diverged "
                   "run?)\n  hint: use an earlier checkpoint of the adapter", source, name, bad, tensor.numel());
  }
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

LoraConfig attach_adapter(Model& model, const fs::path& dir) {
  LoraConfig config = read_adapter_config(dir);
  const std::string task = lora_task_type(model);
  HPCTRAIN_CHECK(config.task_type.empty() || config.task_type == task, "'{}': task_type {} but {} is a {} model", dir.string(),
                 config.task_type, model.spec().architecture, task);
  (void)apply_lora(model, config);
  return config;
}

void load_adapter_weights(Model& model, const fs::path& dir) {
  const TensorMap tensors = load_tensor_file(dir / kAdapterWeightsName);
  load_adapter_state_dict(model, StateDict(tensors.begin(), tensors.end()), (dir / kAdapterWeightsName).string());
}

LoraConfig load_adapter(Model& model, const fs::path& dir) {
  LoraConfig config = attach_adapter(model, dir);
  load_adapter_weights(model, dir);
  return config;
}

}  // namespace hpctrain::models
