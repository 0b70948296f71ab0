// LoRA runs of `hpctrain train` (lora_setup.hpp, Note [LoRA] in models/lora.hpp).
#include "lora_setup.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <sstream>

#include "hpctrain/core/error.hpp"
#include "hpctrain/core/sha256.hpp"
#include "hpctrain/io/atomic_write.hpp"
#include "hpctrain/io/json_text.hpp"
#include "hpctrain/models/pretrained.hpp"
#include "hpctrain/models/qlora.hpp"
#include "hpctrain/models/tensor_io.hpp"
#include "hpctrain/train/run_folder.hpp"

namespace hpctrain::train {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> split_lora_list(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string item; std::getline(in, item, ',');) {
    item.erase(0, item.find_first_not_of(" \t"));
    item.erase(item.find_last_not_of(" \t") + 1);
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

std::string read_lora_text(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  HPCTRAIN_CHECK(in.good(), "'{}': missing (an adapter checkpoint names its base there)", file.string());
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

}  // namespace

// --quantize-base and its options (Note [Quantized base]): QLoRA trains adapters over a frozen 4-bit base.
void check_quantize_options(const TrainOptions& o) {
  const TrainOptions defaults;
  if (o.quantize_base.empty()) {
    HPCTRAIN_CHECK(o.double_quant == defaults.double_quant && o.quant_blocksize == defaults.quant_blocksize &&
                   !o.quantize_embeddings, "--double-quant, --no-double-quant, --quant-blocksize and --quantize-embeddings "
                   "need --quantize-base nf4|fp4");
    return;
  }
  (void)models::parse_quant4_type(o.quantize_base, "--quantize-base");
  models::check_quant4_blocksize(o.quant_blocksize);
  HPCTRAIN_CHECK(o.lora_r > 0, "--quantize-base {} needs --lora-r R (> 0): a 4-bit base is frozen, and QLoRA trains LoRA "
                 "adapters over it", o.quantize_base);
  HPCTRAIN_CHECK(o.accelerator.zero_stage < 3, "--quantize-base {} with --zero-stage {}: ZeRO-3 shards the frozen base's "
                 "parameters, which a 4-bit base does not support\n  hint: --zero-stage 1 or 2 (the adapters' optimizer "
                 "state and gradients) or no --quantize-base", o.quantize_base, o.accelerator.zero_stage);
}

std::optional<models::Quant4Options> quant4_options_of(const TrainOptions& o) {
  if (o.quantize_base.empty()) return std::nullopt;
  return models::Quant4Options{models::parse_quant4_type(o.quantize_base, "--quantize-base"), o.quant_blocksize,
                               o.double_quant, o.quantize_embeddings};
}

void check_lora_options(const TrainOptions& o) {
  check_quantize_options(o);
  if (o.lora_r == 0) {
    const TrainOptions defaults;
    const bool other_lora_option = o.merge_lora || !o.lora_target_modules.empty() ||
                                   o.lora_modules_to_save != defaults.lora_modules_to_save ||
                                   o.lora_alpha != defaults.lora_alpha || o.lora_dropout != defaults.lora_dropout;
    HPCTRAIN_CHECK(!other_lora_option, "--lora-alpha, --lora-dropout, --lora-target-modules, --lora-modules-to-save and "
                   "--merge-lora need --lora-r R (> 0); without it every parameter trains");
    return;
  }
  HPCTRAIN_CHECK(o.lora_r > 0, "--lora-r {}: expected > 0 (0 = no LoRA)", o.lora_r);
  HPCTRAIN_CHECK(std::isfinite(o.lora_alpha) && o.lora_alpha > 0, "--lora-alpha {}: expected a number > 0", o.lora_alpha);
  HPCTRAIN_CHECK(o.lora_dropout >= 0 && o.lora_dropout < 1, "--lora-dropout {}: expected 0 <= p < 1", o.lora_dropout);
  HPCTRAIN_CHECK(!o.model_dir.empty(), "--lora-r {}: LoRA adapts a pretrained base: give --model DIR (a Hugging Face "
                 "folder), not --model-config", o.lora_r);
}

std::optional<models::LoraConfig> lora_config_of(const TrainOptions& o, const models::Model& model) {
  if (o.lora_r == 0) return std::nullopt;
  models::LoraConfig config;
  config.r = o.lora_r, config.alpha = o.lora_alpha, config.dropout = o.lora_dropout;
  config.target_modules = split_lora_list(o.lora_target_modules);
  config.task_type = models::lora_task_type(model);
  if (o.lora_modules_to_save == "auto")
    config.modules_to_save = models::default_modules_to_save(config.task_type);
  else if (o.lora_modules_to_save != "none")
    config.modules_to_save = split_lora_list(o.lora_modules_to_save);
  config.base_model_name_or_path = o.model_dir.string();
  return config;
}

std::string base_weights_sha256(const fs::path& model_dir) {
  if (fs::is_regular_file(model_dir / "model.safetensors")) return sha256_file_hex(model_dir / "model.safetensors");
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(model_dir)) {
    const std::string name = entry.path().filename().string();
    if (name.find(".safetensors") != std::string::npos) names.push_back(name);
  }
  HPCTRAIN_CHECK(!names.empty(), "'{}': no safetensors weights to identify the LoRA base by", model_dir.string());
  std::sort(names.begin(), names.end());
  std::string lines;
  for (const std::string& name : names) lines += fmt::format("{}  {}\n", sha256_file_hex(model_dir / name), name);
  return sha256_hex(lines);
}

LoraRun::LoraRun(std::shared_ptr<models::Model> model, models::LoraConfig config, fs::path base_dir)
    : model_(std::move(model)), config_(std::move(config)), base_dir_(std::move(base_dir)) {}

const std::string& LoraRun::base_sha256() const {
  if (base_sha256_.empty()) base_sha256_ = base_weights_sha256(base_dir_);
  return base_sha256_;
}

void LoraRun::write_base(const fs::path& dir) const {
  nlohmann::json base = {{"base_model_name_or_path", base_dir_.string()}, {"base_weights_sha256", base_sha256()}};
  if (config_.task_type == "SEQ_CLS") base.update(models::adapter_labels_json(model_->config().common));
  io::write_file_atomically(dir / kLoraBaseName, base.dump(2) + "\n");
}

void LoraRun::write(const fs::path& dir) const {
  models::write_adapter_files(*model_, config_, dir);
  write_base(dir);
}

std::map<std::string, at::Tensor> LoraRun::read(const fs::path& dir) const {
  const fs::path file = dir / kLoraBaseName;
  const nlohmann::json base = io::parse_json_text(read_lora_text(file), file.string());
  const std::string recorded = base.value("base_weights_sha256", std::string());
  const std::string recorded_dir = base.value("base_model_name_or_path", std::string());
  HPCTRAIN_CHECK(recorded == base_sha256(),
                 "'{}' is an adapter of the base '{}' (weights sha256 {}), but --model '{}' has weights sha256 {}: an "
                 "adapter resumes only on the base it was trained on\n  hint: pass --model {}",
                 dir.string(), recorded_dir, recorded.substr(0, 12), base_dir_.string(), base_sha256().substr(0, 12),
                 recorded_dir);
  return models::load_tensor_file(dir / models::kAdapterWeightsName);
}

std::map<std::string, at::Tensor> LoraRun::tensors() const {
  const models::StateDict own = models::adapter_state_dict(*model_);
  return {own.begin(), own.end()};
}

void LoraRun::save_final(const fs::path& output, const std::vector<fs::path>& tokenizer_files, bool merge,
                         std::optional<at::ScalarType> save_dtype) const {
  io::write_folder_atomically(output / kFinalName, [&](const fs::path& tmp) {
    write(tmp);
    for (const fs::path& file : tokenizer_files) fs::copy_file(file, tmp / file.filename());
  });
  if (!merge) return;
  models::dequantize_base(*model_);  // Note [Quantized base]: a 4-bit base is saved dequantized, in full precision
  models::merge_lora(*model_);  // the model is a plain transformers model from here on
  models::save_pretrained(*model_, output / kFinalMergedName, tokenizer_files, save_dtype);
}

}  // namespace hpctrain::train
