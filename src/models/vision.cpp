// hpctrain-cnn and hpctrain-mlp (see vision.hpp).
#include "hpctrain/models/vision.hpp"

#include "hpctrain/core/error.hpp"

#include <ATen/ATen.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/pooling.h>

namespace hpctrain::models {

namespace {

// The layer sizes both vision configs describe (the MLP has no conv blocks).
struct Layout {
  int64_t in_channels;
  int64_t image_size;
  std::vector<int64_t> conv_channels;
  std::vector<int64_t> hidden;
  double dropout;
};

Layout layout_of(const io::HfConfig& config, bool convolutional) {
  if (convolutional) {
    const io::CnnConfig& c = config.cnn();
    return {c.in_channels, c.image_size, c.conv_channels, c.hidden, c.dropout};
  }
  const io::MlpConfig& c = config.mlp();
  return {c.in_channels, c.image_size, {}, c.hidden, c.dropout};
}

}  // namespace

ImageClassifier::ImageClassifier(io::HfConfig config, bool convolutional)
    : SequenceClassifier(convolutional ? "CnnClassifier" : "MlpClassifier", std::move(config)) {
  const Layout s = layout_of(this->config(), convolutional);
  const char* type = convolutional ? "hpctrain-cnn" : "hpctrain-mlp";
  spec_ = ModelSpec{type, convolutional ? "HpctrainCnnForImageClassification" : "HpctrainMlpForImageClassification",
                    "", {}, {}, {}};
  in_channels_ = s.in_channels;
  image_size_ = s.image_size;
  HPCTRAIN_CHECK(s.in_channels > 0 && s.image_size > 0, "{} config: in_channels and image_size must be positive, "
                 "got {} and {}", type, s.in_channels, s.image_size);
  int64_t width = s.in_channels * s.image_size * s.image_size;  // flattened input of the classifier
  if (convolutional) {
    features = register_module("features", torch::nn::Sequential());
    int64_t channels = s.in_channels;
    int64_t side = s.image_size;
    for (const int64_t out : s.conv_channels) {
      HPCTRAIN_CHECK(out > 0 && side >= 2, "hpctrain-cnn config: conv_channels {} on {}x{} pixels: every entry "
                     "must be positive and each block halves the image (too many blocks?)", out, side, side);
      features->push_back(torch::nn::Conv2d(torch::nn::Conv2dOptions(channels, out, 3).padding(1)));
      features->push_back(torch::nn::ReLU());
      features->push_back(torch::nn::MaxPool2d(torch::nn::MaxPool2dOptions(2)));
      channels = out;
      side /= 2;
    }
    width = channels * side * side;
  }
  classifier = register_module("classifier", torch::nn::Sequential());
  for (const int64_t hidden : s.hidden) {
    HPCTRAIN_CHECK(hidden > 0, "{} config: hidden sizes must be positive, got {}", type, hidden);
    classifier->push_back(torch::nn::Linear(width, hidden));
    classifier->push_back(torch::nn::ReLU());
    classifier->push_back(torch::nn::Dropout(s.dropout));
    width = hidden;
  }
  classifier->push_back(torch::nn::Linear(width, num_labels()));
}

void ImageClassifier::init_weights() {
  for (const auto& module : modules(/*include_self=*/false)) {
    if (auto* linear = dynamic_cast<torch::nn::LinearImpl*>(module.get())) linear->reset_parameters();
    if (auto* conv = dynamic_cast<torch::nn::Conv2dImpl*>(module.get())) conv->reset_parameters();
  }
}

ModelOutput ImageClassifier::forward(const ModelInputs& inputs) {
  const at::Tensor& pixels = inputs.pixel_values;
  HPCTRAIN_CHECK(pixels.defined() && pixels.dim() == 4 && pixels.size(1) == in_channels_ &&
                     pixels.size(2) == image_size_ && pixels.size(3) == image_size_,
                 "{}: pixel_values must be [batch, {}, {}, {}], got {}", spec_.model_type, in_channels_, image_size_,
                 image_size_, pixels.defined() ? c10::str(pixels.sizes()) : std::string("none"));
  at::Tensor x = features ? features->forward(pixels) : pixels;
  ModelOutput out;
  out.logits = classifier->forward(x.flatten(1));
  if (inputs.labels.defined()) out.loss = classification_loss(out.logits, inputs.labels, config().common.problem_type);
  return out;
}

}  // namespace hpctrain::models
