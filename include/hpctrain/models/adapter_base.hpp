// The base a classifier adapter is applied to (`eval|predict --model BASE --adapter DIR`), sized for the
// adapter's head: PeftModel.from_pretrained with the num_labels the adapter was trained for.
//
// Note [Adapter labels]
// The common LoRA case is a pretrained encoder (a BertModel folder: config.json without id2label, i.e. 2
// labels) with a new head trained as a module to save on a dataset of N labels. peft users pass num_labels
// themselves; hpctrain takes it from the adapter folder, in this order:
//  1. lora_base.json's id2label (hpctrain's train writes it beside the adapter; peft ignores the file);
//  2. the first dimension of the saved head (`classifier.weight` or `score.weight` under "base_model.model.",
//     as peft saves modules_to_save), with the dataset's label names when their count matches, else
//     LABEL_0..LABEL_{N-1};
//  3. neither (a causal LM, or an adapter without a head): the base's config as it is.
// The base's head is then built for N labels; its tensors in the base folder, of another size, are left out
// (drop_resized_head), and the adapter's modules to save fill it in.
#pragma once

#include "hpctrain/io/hf_config.hpp"
#include "hpctrain/models/nf4.hpp"
#include "hpctrain/models/pretrained.hpp"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>
#include <vector>

namespace hpctrain::models {

// Beside an adapter trained by hpctrain: base_model_name_or_path, base_weights_sha256 and, for a classifier,
// id2label and label2id (Note [Adapter labels]).
constexpr const char* kAdapterBaseName = "lora_base.json";

// {"id2label": {"0": name, ...}, "label2id": {name: id, ...}} of `config` (config.json's form).
[[nodiscard]] nlohmann::json adapter_labels_json(const io::CommonConfig& config);

// The base's config (base_dir/config.json) with the labels of the adapter in `adapter_dir` (Note [Adapter
// labels]); `dataset_labels` names the classes when only the head's size is known.
[[nodiscard]] io::HfConfig adapter_base_config(const std::filesystem::path& base_dir, const std::filesystem::path& adapter_dir,
                                               const std::vector<std::string>& dataset_labels);

// build_model(config) with base_dir's weights (a head of another size left out) and then the adapter loaded
// (load_adapter). The report's newly initialized tensors are those the adapter did not fill in.
[[nodiscard]] Loaded<Model> load_pretrained_with_adapter(const std::filesystem::path& base_dir,
                                                         const std::filesystem::path& adapter_dir, const io::HfConfig& config);

// The same with the base held in 4-bit form (QLoRA, Note [Quantized at load]): the model built with deferred
// parameters, the base's weights mapped, the adapter attached, each frozen weight quantized as it is read (never the
// whole base in float32), then the adapter's tensors loaded. `summary` (optional) gets quantize_frozen_base's.
[[nodiscard]] Loaded<Model> load_quantized_with_adapter(const std::filesystem::path& base_dir,
                                                        const std::filesystem::path& adapter_dir,
                                                        const io::HfConfig& config, const Quant4Options& quant,
                                                        std::string* summary = nullptr);

}  // namespace hpctrain::models
