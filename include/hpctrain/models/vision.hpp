// Small image classifiers for MNIST-style data (config model_type "hpctrain-cnn" / "hpctrain-mlp").
// Input pixel_values floating [B, in_channels, image_size, image_size]. Config keys: io::CnnConfig,
// io::MlpConfig (docs/model-configs.md).
//
// Parameter names (torchvision style, an nn.Sequential index per layer; a Python user rebuilds the
// model with the same Sequential and loads the safetensors file as is):
//   hpctrain-cnn  features.{3i}.weight/bias     conv i: Conv2d(3x3, padding 1) -> ReLU -> MaxPool2d(2)
//                 classifier.{3j}.weight/bias   hidden[j]: Linear -> ReLU -> Dropout, on the flattened map
//                 classifier.{3n}.weight/bias   last: Linear(.., num_labels)   (n = hidden layers)
//   hpctrain-mlp  classifier.{3j}, classifier.{3n} as above, on the flattened image
// e.g. conv_channels [32, 64], hidden [128] on 1x28x28: features.0 [32,1,3,3], features.3
// [64,32,3,3], classifier.0 [128, 3136], classifier.3 [10, 128].
#pragma once

#include "hpctrain/models/model.hpp"

#include <torch/nn/modules/container/sequential.h>

#include <cstdint>
#include <vector>

namespace hpctrain::models {

// Shared by both: an optional feature extractor and the fully connected classifier.
class ImageClassifier : public SequenceClassifier {
 public:
  ModelOutput forward(const ModelInputs& inputs) override;
  [[nodiscard]] const ModelSpec& spec() const override { return spec_; }
  // PyTorch's default initialization (Kaiming-uniform weights, uniform biases), as a Python user of
  // the same nn.Sequential gets.
  void init_weights() override;

  torch::nn::Sequential features{nullptr};  // null for the MLP
  torch::nn::Sequential classifier{nullptr};

 protected:
  // Builds from config.cnn() (convolutional) or config.mlp().
  ImageClassifier(io::HfConfig config, bool convolutional);

 private:
  int64_t in_channels_;
  int64_t image_size_;
  ModelSpec spec_;
};

class CnnClassifier : public ImageClassifier {
 public:
  explicit CnnClassifier(io::HfConfig config) : ImageClassifier(std::move(config), true) {}
};

class MlpClassifier : public ImageClassifier {
 public:
  explicit MlpClassifier(io::HfConfig config) : ImageClassifier(std::move(config), false) {}
};

}  // namespace hpctrain::models
