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

namespace hpctrain::train {

struct ModelSetup {
  std::shared_ptr<models::SequenceClassifier> model;
  std::vector<std::filesystem::path> tokenizer_files;  // copied into checkpoints and final/
  std::vector<std::string> notes;                      // what was decided, for the log
};

// Names accepted as --model-config preset:NAME.
[[nodiscard]] std::vector<std::string> model_presets();
// A preset's config, sized from the dataset (vocab_size for text, channels and image size for images):
//   tiny-distilbert  dim 128, 2 layers, 2 heads, hidden_dim 256, max_position_embeddings 512
//   tiny-bert        hidden 128, 2 layers, 2 heads, intermediate 256
//   cnn, mlp         hpctrain-cnn / hpctrain-mlp with their defaults
[[nodiscard]] io::HfConfig preset_config(const std::string& name, const data::DatasetReader& dataset);

// Builds the model (torch::manual_seed(options.seed) first, so every rank draws the same weights):
// config from --model / --model-config, labels set from the dataset's label_names (a --model head of
// another size is re-initialized and reported), weights loaded strictly from --model.
[[nodiscard]] ModelSetup build_model(const TrainOptions& options, const data::DatasetReader& dataset);

}  // namespace hpctrain::train
