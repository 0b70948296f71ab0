// The benchmark models of issue 3 ("Speed") and their random inputs, shared by bench_models (one
// process) and bench_train (data-parallel). The Python peers build the same layers
// (bench/models/torch_models.py).
#pragma once

#include "hpctrain/io/hf_config.hpp"
#include "hpctrain/models/model.hpp"

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

namespace hpctrain::bench {

// DistilBERT-style: dim 256, 4 layers, 4 heads, ffn 1024, vocab 30522; distilbert-base: dim 768, 6 layers,
// 12 heads, ffn 3072. CNN: conv 32 -> conv 64 -> fc 128 -> 10.
inline nlohmann::json benchmark_config(const std::string& model) {
  if (model == "distilbert") {
    return {{"model_type", "distilbert"}, {"dim", 256},        {"n_layers", 4},
            {"n_heads", 4},               {"hidden_dim", 1024}, {"vocab_size", 30522},
            {"num_labels", 2}};
  }
  if (model == "distilbert-base") {
    return {{"model_type", "distilbert"}, {"dim", 768},        {"n_layers", 6},
            {"n_heads", 12},              {"hidden_dim", 3072}, {"vocab_size", 30522},
            {"num_labels", 2}};
  }
  if (model == "cnn") {
    return {{"model_type", "hpctrain-cnn"}, {"in_channels", 1},     {"image_size", 28},
            {"conv_channels", {32, 64}},    {"hidden", {128}},      {"num_labels", 10}};
  }
  std::cerr << "--model must be distilbert, distilbert-base or cnn, got '" << model << "'\n";
  std::exit(2);
}

// Per-process batch: 16 sequences of 128 tokens (32 for distilbert-base), or 64 images of 28 x 28.
inline int64_t benchmark_batch(const std::string& model) {
  return model == "distilbert" ? 16 : model == "distilbert-base" ? 32 : 64;
}

// Random inputs and labels from LibTorch's current generator: `batch` examples, sequences of `length` tokens.
inline models::ModelInputs benchmark_inputs(const std::string& model, int64_t batch, int64_t length) {
  models::ModelInputs inputs;
  if (model != "cnn") {
    inputs.input_ids = at::randint(0, 30522, {batch, length}, at::kLong);
    inputs.attention_mask = at::ones({batch, length}, at::kLong);
    inputs.labels = at::randint(0, 2, {batch}, at::kLong);
  } else {
    inputs.pixel_values = at::randn({batch, 1, 28, 28});
    inputs.labels = at::randint(0, 10, {batch}, at::kLong);
  }
  return inputs;
}

// The benchmark batch (benchmark_batch(model) examples, 128 tokens).
inline models::ModelInputs benchmark_inputs(const std::string& model) {
  return benchmark_inputs(model, benchmark_batch(model), 128);
}

// Median of step times (not empty).
inline double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

}  // namespace hpctrain::bench
