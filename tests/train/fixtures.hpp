// Fixtures for the trainer tests: a scratch folder, a tiny text dataset written with DatasetWriter, a
// tiny DistilBERT config.json, and a small module for the Accelerator.
#pragma once

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>
#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>

#include "hpctrain/core/random.hpp"
#include "hpctrain/data/dataset_writer.hpp"
#include "hpctrain/train/train_options.hpp"

namespace trainer_test {

namespace fs = std::filesystem;

inline constexpr int64_t kVocab = 40;
inline constexpr int64_t kLabels = 3;

class Scratch {
 public:
  explicit Scratch(const std::string& tag)
      : dir_(fs::temp_directory_path() / ("hpctrain-trainer-" + tag + "-" + std::to_string(::getpid()))) {
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  ~Scratch() { fs::remove_all(dir_); }
  const fs::path& dir() const { return dir_; }
  fs::path operator/(const std::string& name) const { return dir_ / name; }

 private:
  fs::path dir_;
};

// [CLS] w... [SEP] with the label a function of the first word, so a model can learn it.
inline hpctrain::data::TextExamples tiny_examples(int64_t n, uint64_t seed) {
  hpctrain::SplitMix64 rng(seed);
  hpctrain::data::TextExamples text;
  for (int64_t i = 0; i < n; ++i) {
    std::vector<int32_t> ids{2};
    const auto length = 2 + static_cast<int64_t>(rng.below(7));
    for (int64_t t = 0; t < length; ++t) ids.push_back(5 + static_cast<int32_t>(rng.below(kVocab - 5)));
    ids.push_back(3);
    text.append(ids, {}, ids[1] % kLabels, i);
  }
  return text;
}

inline fs::path write_tiny_dataset(const fs::path& path, int64_t train = 24, int64_t validation = 10) {
  hpctrain::data::FileAttributes attributes;
  attributes.task = hpctrain::data::Task::text_classification;
  attributes.label_names = {"red", "green", "blue"};
  attributes.source = "synthetic";
  attributes.created_by = "hpctrain trainer tests";
  attributes.tokenizer = {{"vocab_size", kVocab}, {"do_lower_case", true}, {"max_length", 16}};
  hpctrain::data::DatasetWriter writer(path, attributes, {hpctrain::data::Compression::none, 1}, true);
  writer.write_text_split("train", tiny_examples(train, 1), false);
  writer.write_text_split("validation", tiny_examples(validation, 2), false);
  writer.commit();
  return path;
}

inline fs::path write_tiny_config(const fs::path& path, double dropout = 0.0) {
  const nlohmann::json config = {
      {"model_type", "distilbert"}, {"vocab_size", kVocab}, {"dim", 16},  {"n_layers", 1},
      {"n_heads", 2}, {"hidden_dim", 32}, {"max_position_embeddings", 32}, {"dropout", dropout},
      {"attention_dropout", dropout}, {"seq_classif_dropout", dropout}};
  std::ofstream(path) << config.dump(2);
  return path;
}

// Options of a quick run on the tiny dataset: 2 examples per batch, 1 thread, no progress bar.
inline hpctrain::train::TrainOptions tiny_options(const Scratch& scratch, double dropout = 0.0) {
  hpctrain::train::TrainOptions o;
  o.data = fs::exists(scratch / "data.h5") ? scratch / "data.h5" : write_tiny_dataset(scratch / "data.h5");
  o.model_config = write_tiny_config(scratch / "config.json", dropout).string();
  o.output = scratch / "run";
  o.batch_size = 4, o.epochs = 1, o.lr = 1e-3, o.accelerator.threads = 1, o.progress = false, o.logging_steps = 1;
  o.accelerator.device = "cpu";
  return o;
}

// Two linear layers and a parameter that never gets a gradient.
struct TinyNet : torch::nn::Module {
  TinyNet() {
    first = register_module("first", torch::nn::Linear(4, 8));
    second = register_module("second", torch::nn::Linear(8, 3));
    unused = register_parameter("unused", at::ones({5}));
  }
  at::Tensor forward(const at::Tensor& x) { return second->forward(at::tanh(first->forward(x))); }
  torch::nn::Linear first{nullptr}, second{nullptr};
  at::Tensor unused;
};

}  // namespace trainer_test
