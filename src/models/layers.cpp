// Shared building blocks (layers.hpp) and the loss every classifier uses (model.hpp).
#include "models/layers.hpp"

#include "hpctrain/compat/torch.hpp"
#include "hpctrain/core/error.hpp"
#include "hpctrain/models/loss.hpp"
#include "hpctrain/models/materialize.hpp"
#include "hpctrain/models/model.hpp"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>

#include <cmath>

namespace hpctrain::models {

namespace {

bool is_integral(const at::Tensor& t) { return !at::isFloatingType(t.scalar_type()) && !t.is_complex(); }

}  // namespace

// As transformers' *ForSequenceClassification.forward (the problem type is decided per call and not
// stored back, so one model can be called with both kinds of labels in tests).
at::Tensor classification_loss(const at::Tensor& bare_logits, const at::Tensor& labels, io::ProblemType problem_type) {
  using io::ProblemType;
  // The loss in fp32 (bf16/fp16 logits come from an autocast region).
  const bool half = bare_logits.scalar_type() == at::kBFloat16 || bare_logits.scalar_type() == at::kHalf;
  const at::Tensor logits = half ? bare_logits.to(at::kFloat) : bare_logits;
  const int64_t num_labels = logits.size(-1);
  if (problem_type == ProblemType::unset) {
    if (num_labels == 1) problem_type = ProblemType::regression;
    else if (is_integral(labels)) problem_type = ProblemType::single_label_classification;
    else problem_type = ProblemType::multi_label_classification;
  }
  switch (problem_type) {
    case ProblemType::regression: {
      const at::Tensor target = labels.to(logits.scalar_type());
      if (num_labels == 1) return at::mse_loss(logits.squeeze(), target.squeeze());
      return at::mse_loss(logits, target);
    }
    case ProblemType::single_label_classification:
      HPCTRAIN_CHECK(is_integral(labels),
                     "single_label_classification needs integer class labels [B], got {} labels",
                     std::string(c10::toString(labels.scalar_type())));
      return cross_entropy(logits.view({-1, num_labels}), labels.view({-1}), at::Reduction::Mean);
    case ProblemType::multi_label_classification:
      HPCTRAIN_CHECK(labels.sizes() == logits.sizes(),
                     "multi_label_classification needs labels shaped like the logits [B, {}], got {}",
                     num_labels, c10::str(labels.sizes()));
      return at::binary_cross_entropy_with_logits(logits, labels.to(logits.scalar_type()));
    case ProblemType::unset: break;
  }
  fail("unreachable problem type");
}

namespace detail {

at::Tensor activate(const at::Tensor& x, io::Activation activation) {
  switch (activation) {
    case io::Activation::gelu: return at::gelu(x);  // approximate="none": x * Phi(x) with erf, as HF "gelu"
    case io::Activation::gelu_tanh: return at::gelu(x, "tanh");
    case io::Activation::relu: return at::relu(x);
    case io::Activation::silu: return at::silu(x);
  }
  return x;
}

void init_like_transformers(torch::nn::Module& root, double std) {
  at::NoGradGuard no_grad;
  // include_self=false: the root is not a Linear/Embedding/LayerNorm, and during its constructor it
  // is not yet owned by a shared_ptr (which modules(true) needs).
  for (const auto& module : root.modules(/*include_self=*/false)) {
    // Note [Deferred materialization]: only what initializes() allows.
    if (auto* linear = dynamic_cast<torch::nn::LinearImpl*>(module.get())) {
      if (initializes(linear->weight)) linear->weight.normal_(0.0, std);
      if (linear->bias.defined() && initializes(linear->bias)) linear->bias.zero_();
    } else if (auto* embedding = dynamic_cast<torch::nn::EmbeddingImpl*>(module.get())) {
      if (!initializes(embedding->weight)) continue;
      embedding->weight.normal_(0.0, std);
      if (const auto& padding = embedding->options.padding_idx()) embedding->weight[*padding].zero_();
    } else if (auto* norm = dynamic_cast<torch::nn::LayerNormImpl*>(module.get())) {
      if (initializes(norm->weight)) norm->weight.fill_(1.0);
      if (initializes(norm->bias)) norm->bias.zero_();
    }
  }
}

at::Tensor sinusoidal_table(int64_t n_pos, int64_t dim) {
  at::Tensor table = at::empty({n_pos, dim}, at::kFloat);
  float* out = table.data_ptr<float>();
  for (int64_t pos = 0; pos < n_pos; ++pos) {
    for (int64_t j = 0; j < dim; ++j) {
      const double angle = static_cast<double>(pos) /
                           std::pow(10000.0, 2.0 * static_cast<double>(j / 2) / static_cast<double>(dim));
      out[pos * dim + j] = static_cast<float>(j % 2 == 0 ? std::sin(angle) : std::cos(angle));
    }
  }
  return table;
}

at::Tensor norm_in_fp32(const torch::nn::LayerNorm& norm, const at::Tensor& x) {
  // Outside autocast a model cast as a whole (model->to(kBFloat16 or kDouble)) normalizes in its own dtype.
  if (!compat::AutocastScope::is_enabled(x.device().type())) return norm.ptr()->forward(x);
  const compat::AutocastScope fp32(x.device().type(), /*enabled=*/false);
  return norm.ptr()->forward(x.to(norm->weight.scalar_type()));  // the master weights' dtype: float32
}

}  // namespace detail
}  // namespace hpctrain::models

