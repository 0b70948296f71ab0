// Private to src/train: the LoRA side of `hpctrain train` (Note [LoRA] in models/lora.hpp). The options as a
// models::LoraConfig, the frozen base's identity (its folder and the sha256 of its weights), checkpoints that
// hold only the adapter (and the modules to save) through Accelerator::set_model_files, and final/ in PEFT's
// format (plus final-merged/ with --merge-lora).
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "hpctrain/models/adapter_base.hpp"
#include "hpctrain/models/lora.hpp"
#include "hpctrain/train/accelerator.hpp"
#include "hpctrain/train/train_options.hpp"

namespace hpctrain::train {

// Beside the adapter in checkpoints and final/: {"base_model_name_or_path", "base_weights_sha256"} and, for a
// classifier, id2label and label2id (Note [Adapter labels] in models/adapter_base.hpp).
constexpr const char* kLoraBaseName = models::kAdapterBaseName;

// The adapter options of `options` for `model` (--lora-modules-to-save auto: PEFT's for its task); nullopt when
// --lora-r is 0 (no LoRA).
[[nodiscard]] std::optional<models::LoraConfig> lora_config_of(const TrainOptions& options, const models::Model& model);
// Checks of the LoRA options (and QLoRA's --quantize-base) that need no model (validate_train_options calls it).
void check_lora_options(const TrainOptions& options);
// --quantize-base's options; nullopt without it.
[[nodiscard]] std::optional<models::Quant4Options> quant4_options_of(const TrainOptions& options);

// sha256 of a Hugging Face folder's weights: of model.safetensors, or (sharded) of the lines
// "<sha256>  <file>" of its index and shards in name order.
[[nodiscard]] std::string base_weights_sha256(const std::filesystem::path& model_dir);

// An adapter run: the model (with its adapters attached), the resolved config and the base.
class LoraRun : public ModelFiles {
 public:
  LoraRun(std::shared_ptr<models::Model> model, models::LoraConfig config, std::filesystem::path base_dir);
  // ModelFiles (rank 0): adapter_config.json, adapter_model.safetensors and lora_base.json; read() refuses a
  // checkpoint of another base (Error naming both folders and both hashes).
  void write(const std::filesystem::path& dir) const override;
  [[nodiscard]] std::map<std::string, at::Tensor> read(const std::filesystem::path& dir) const override;
  [[nodiscard]] std::map<std::string, at::Tensor> tensors() const override;
  // Rank 0: OUTPUT/final as peft's save_pretrained (+ tokenizer files); with `merge` also OUTPUT/final-merged,
  // the base with every adapter merged (a transformers model folder). Merging changes the model: call it last.
  void save_final(const std::filesystem::path& output, const std::vector<std::filesystem::path>& tokenizer_files,
                  bool merge, std::optional<at::ScalarType> save_dtype) const;
  [[nodiscard]] const models::LoraConfig& config() const { return config_; }

 private:
  [[nodiscard]] const std::string& base_sha256() const;
  void write_base(const std::filesystem::path& dir) const;

  std::shared_ptr<models::Model> model_;
  models::LoraConfig config_;
  std::filesystem::path base_dir_;
  mutable std::string base_sha256_;  // hashed on first use (rank 0 only)
};

}  // namespace hpctrain::train
