// Private to src/train: the model `hpctrain train` trains — from a Hugging Face folder, a config.json or
// a built-in preset — with the dataset's labels, and the tokenizer files its checkpoints carry.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "hpctrain/data/dataset_reader.hpp"
#include "hpctrain/io/hf_config.hpp"
#include "hpctrain/models/model.hpp"
#include "hpctrain/train/train_options.hpp"
#include "lora_setup.hpp"

namespace hpctrain::train {

struct ModelSetup {
  std::shared_ptr<models::Model> model;  // a classifier, or a causal LM for a causal-lm dataset
  // Copied into checkpoints and final/: the tokenizer's files, and the --model folder's generation_config.json.
  std::vector<std::filesystem::path> tokenizer_files;
  std::vector<std::string> notes;                      // what was decided, for the log
  std::shared_ptr<LoraRun> lora;  // --lora-r > 0: the adapters attached to `model` (Note [LoRA]); null otherwise
};

// Names accepted as --model-config preset:NAME.
[[nodiscard]] std::vector<std::string> model_presets();
// A preset's config, sized from the dataset (vocab_size for text, channels and image size for images):
//   tiny-distilbert  dim 128, 2 layers, 2 heads, hidden_dim 256, max_position_embeddings 512
//   tiny-bert        hidden 128, 2 layers, 2 heads, intermediate 256
//   cnn, mlp         hpctrain-cnn / hpctrain-mlp with their defaults
//   tiny-gpt2        GPT-2: n_embd 128, 2 layers, 2 heads, n_positions 1024 (causal-lm datasets)
//   tiny-llama       Llama: hidden 128, 2 layers, 4 heads / 2 KV heads, intermediate 256, 2048 positions
// A causal-LM preset takes bos/eos_token_id from the dataset's tokenizer (config.json, as generate reads them).
[[nodiscard]] io::HfConfig preset_config(const std::string& name, const data::DatasetReader& dataset);

// The model's config (from --model, --model-config or a preset), checked against the dataset (Note [Model fits
// the dataset]): the task's model kind, vocabulary, positions, image shape. Cheap: nothing is built.
[[nodiscard]] io::HfConfig check_model_config(const TrainOptions& options, const data::DatasetReader& dataset);

// Builds the model (torch::manual_seed(options.seed) first, so every rank draws the same weights):
// config from --model / --model-config, for a labelled dataset labels set from its label_names (a --model
// head of another size is re-initialized and reported), weights loaded strictly from --model; with --lora-r the
// adapters attached and the base frozen (Note [LoRA]).
// world_size: the ranks --zero-stage 3 shards over (the size check counts one rank's part).
[[nodiscard]] ModelSetup build_model(const TrainOptions& options, const data::DatasetReader& dataset, int world_size = 1);

}  // namespace hpctrain::train
