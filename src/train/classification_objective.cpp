// Classification (objective.hpp, Note [Objectives]): cross-entropy summed over the kept rows, counted in
// rows; accuracy and macro-F1 from the confusion matrix of the whole split; the best model is the most
// accurate. Text and image classifiers alike.
#include <ATen/ATen.h>
#include <fmt/format.h>

#include "hpctrain/core/error.hpp"
#include "hpctrain/train/objective.hpp"

namespace hpctrain::train {
namespace {

double majority_of(const ConfusionMatrix& matrix) {
  std::vector<int64_t> label_counts(static_cast<std::size_t>(matrix.num_labels()), 0);
  for (int64_t label = 0; label < matrix.num_labels(); ++label)
    for (int64_t guess = 0; guess < matrix.num_labels(); ++guess)
      label_counts[static_cast<std::size_t>(label)] += matrix.count(label, guess);
  return majority_baseline(label_counts);
}

models::SequenceClassifier& classifier(models::Model& model) {
  auto* out = dynamic_cast<models::SequenceClassifier*>(&model);
  HPCTRAIN_CHECK(out != nullptr, "classification needs a sequence or image classifier, not {}", model.spec().architecture);
  return *out;
}

class Classification final : public Objective {
 public:
  MicroBatchLoss loss(models::Model& model, const loader::Batch& batch, const at::Tensor& keep,
                      const Accelerator& acc) override {
    models::ModelInputs inputs = to_model_inputs(batch, acc.device());
    const at::Tensor labels = inputs.labels;
    inputs.labels = at::Tensor();  // per-example losses below, not the model's batch mean
    at::Tensor logits;
    {
      const AutocastRegion region = acc.autocast();  // --mixed-precision: the forward's matrix products
      logits = model.forward(inputs).logits;
    }
    // The loss in fp32, outside the autocast region.
    const at::Tensor per_example = at::cross_entropy_loss(logits.to(at::kFloat), labels, {}, at::Reduction::None);
    MicroBatchLoss out;
    out.sum = at::where(keep.to(acc.device()), per_example, at::zeros_like(per_example)).sum();
    out.count = static_cast<double>(keep.sum().item<int64_t>());
    return out;
  }

  Evaluation evaluate(models::Model& model, loader::ShardLoader& loader, Accelerator& acc, NonFinite nonfinite) override {
    const EvaluationResult result = train::evaluate(classifier(model), loader, acc.comm(), acc.device(), nonfinite,
                                                    acc.precision().autocast_dtype());
    Evaluation out;
    out.metrics.loss = result.metrics.loss, out.metrics.examples = result.metrics.examples;
    out.metrics.scores = {{"accuracy", "accuracy", result.metrics.accuracy},
                          {"macro_f1", "macro-F1", result.metrics.macro_f1}};
    out.baseline = majority_of(result.matrix);
    return out;
  }

  std::string best_metric() const override { return "accuracy"; }

  std::string describe(const Evaluation& e) const override {
    return fmt::format("accuracy {:.4f} (majority-class baseline {:.4f}), macro-F1 {:.4f}, loss {:.4f} over {} examples",
                       e.metrics.score("accuracy").value_or(0), e.baseline.value_or(0),
                       e.metrics.score("macro_f1").value_or(0), e.metrics.loss, e.metrics.examples);
  }
};

}  // namespace

std::unique_ptr<Objective> make_classification_objective() { return std::make_unique<Classification>(); }

}  // namespace hpctrain::train
