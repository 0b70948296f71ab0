#include "hpctrain/train/evaluation.hpp"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <algorithm>

#include "hpctrain/core/error.hpp"

namespace hpctrain::train {
namespace {

// Puts the model in eval mode for a scope and restores its mode afterwards.
class EvalModeScope {
 public:
  explicit EvalModeScope(torch::nn::Module& model) : model_(model), was_training_(model.is_training()) { model_.eval(); }
  ~EvalModeScope() { model_.train(was_training_); }

 private:
  torch::nn::Module& model_;
  bool was_training_;
};

at::Tensor on(const at::Tensor& tensor, const at::Device& device) {
  return tensor.defined() ? tensor.to(device) : tensor;
}

}  // namespace

models::ModelInputs to_model_inputs(const loader::Batch& batch, const at::Device& device) {
  models::ModelInputs inputs;
  inputs.input_ids = on(batch.input_ids, device);
  inputs.attention_mask = on(batch.attention_mask, device);
  inputs.token_type_ids = on(batch.token_type_ids, device);
  inputs.pixel_values = on(batch.pixel_values, device);
  inputs.labels = on(batch.labels, device);
  return inputs;
}

EvaluationResult evaluate(models::SequenceClassifier& model, loader::ShardLoader& loader, dist::Comm& comm,
                          const at::Device& device) {
  EvalModeScope eval_mode(model);
  at::NoGradGuard no_grad;
  ConfusionMatrix matrix(model.num_labels());
  double loss_sum = 0;
  loader.start_epoch(0);
  while (auto batch = loader.next()) {
    models::ModelInputs inputs = to_model_inputs(*batch, device);
    inputs.labels = at::Tensor();  // per-example losses below, not the model's batch mean
    const at::Tensor logits = model.forward(inputs).logits.to(at::kFloat).cpu();
    const at::Tensor keep = batch->is_padding.logical_not();
    const at::Tensor labels = batch->labels.index({keep});
    const at::Tensor kept_logits = logits.index({keep});
    if (labels.numel() == 0) continue;
    HPCTRAIN_CHECK(kept_logits.size(1) == model.num_labels(), "the model gives {} logits but has {} labels",
                   kept_logits.size(1), model.num_labels());
    loss_sum += at::cross_entropy_loss(kept_logits, labels, {}, at::Reduction::Sum).item<double>();
    const at::Tensor predicted = kept_logits.argmax(1);
    const auto* label = labels.data_ptr<int64_t>();
    const auto* guess = predicted.data_ptr<int64_t>();
    for (int64_t i = 0; i < labels.numel(); ++i) matrix.add(label[i], guess[i]);
  }
  comm.allreduce(matrix.counts().data(), matrix.counts().size());
  comm.allreduce(&loss_sum, 1);
  EvaluationResult result{matrix, compute_metrics(matrix)};
  result.metrics.loss = result.metrics.examples > 0 ? loss_sum / static_cast<double>(result.metrics.examples) : 0.0;
  return result;
}

std::vector<Prediction> predict(models::SequenceClassifier& model, loader::ShardLoader& loader, dist::Comm& comm,
                                const at::Device& device) {
  EvalModeScope eval_mode(model);
  at::NoGradGuard no_grad;
  const int64_t k = model.num_labels();
  // Rows of [index, label, logits...] as doubles (exact for indices below 2^53), for one allgather.
  std::vector<double> rows;
  loader.start_epoch(0);
  while (auto batch = loader.next()) {
    models::ModelInputs inputs = to_model_inputs(*batch, device);
    inputs.labels = at::Tensor();
    const at::Tensor logits = model.forward(inputs).logits.to(at::kFloat).cpu().contiguous();
    for (int64_t i = 0; i < batch->size(); ++i) {
      if (batch->is_padding[i].item<bool>()) continue;
      rows.push_back(static_cast<double>(batch->example_index[i].item<int64_t>()));
      rows.push_back(static_cast<double>(batch->labels[i].item<int64_t>()));
      const float* row = logits.data_ptr<float>() + i * k;
      rows.insert(rows.end(), row, row + k);
    }
  }
  // Variable sizes: agree on the largest, pad, gather, trim.
  const auto counts = comm.allgather_value<int64_t>(static_cast<int64_t>(rows.size()));
  const int64_t longest = *std::max_element(counts.begin(), counts.end());
  rows.resize(static_cast<std::size_t>(longest), 0.0);
  std::vector<double> all(static_cast<std::size_t>(longest * comm.world_size()));
  comm.allgather(rows.data(), static_cast<std::size_t>(longest) * sizeof(double), all.data());
  std::vector<Prediction> predictions;
  if (!comm.is_main_process()) return predictions;
  const int64_t width = 2 + k;
  for (int r = 0; r < comm.world_size(); ++r) {
    const double* base = all.data() + static_cast<std::size_t>(r * longest);
    for (int64_t at = 0; at < counts[static_cast<std::size_t>(r)]; at += width) {
      Prediction p;
      p.index = static_cast<int64_t>(base[at]);
      p.label = static_cast<int64_t>(base[at + 1]);
      p.logits.assign(base + at + 2, base + at + width);
      predictions.push_back(std::move(p));
    }
  }
  std::sort(predictions.begin(), predictions.end(), [](const Prediction& a, const Prediction& b) { return a.index < b.index; });
  return predictions;
}

}  // namespace hpctrain::train
