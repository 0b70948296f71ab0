// Classification (objective.hpp, Note [Objectives]): cross-entropy summed over the kept rows, counted in
// rows; accuracy and macro-F1 from the confusion matrix of the whole split; the best model is the most
// accurate; `hpctrain predict` writes each example's label and logits. Text and image classifiers alike.
#include <ATen/ATen.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "hpctrain/core/error.hpp"
#include "hpctrain/models/loss.hpp"
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

// `hpctrain eval`'s table: the metrics, per-class precision/recall/F1 and the confusion matrix.
std::string format_metrics(const EvaluationResult& result, const std::vector<std::string>& names) {
  const auto& m = result.metrics;
  std::string out = fmt::format("examples {}  loss {:.4f}  accuracy {:.4f}  macro-F1 {:.4f}\n\n", m.examples, m.loss,
                                m.accuracy, m.macro_f1);
  out += fmt::format("  {:<24} {:>9} {:>9} {:>9} {:>8}\n", "label", "precision", "recall", "f1", "support");
  for (std::size_t c = 0; c < m.per_class.size(); ++c) {
    const auto& pc = m.per_class[c];
    out += fmt::format("  {:<24} {:>9.4f} {:>9.4f} {:>9.4f} {:>8}\n", names[c], pc.precision, pc.recall, pc.f1, pc.support);
  }
  out += "\n  confusion matrix (rows: label, columns: predicted)\n";
  for (int64_t label = 0; label < result.matrix.num_labels(); ++label) {
    out += fmt::format("  {:<24}", names[static_cast<std::size_t>(label)]);
    for (int64_t p = 0; p < result.matrix.num_labels(); ++p) out += fmt::format(" {:>7}", result.matrix.count(label, p));
    out += "\n";
  }
  return out;
}

models::SequenceClassifier& classifier(models::Model& model) {
  auto* out = dynamic_cast<models::SequenceClassifier*>(&model);
  HPCTRAIN_CHECK(out != nullptr, "classification needs a sequence or image classifier, not {}", model.spec().architecture);
  return *out;
}

class Classification final : public Objective {
 public:
  void check_trainable(const data::DatasetReader& dataset) const override {
    HPCTRAIN_CHECK(dataset.num_labels() >= 2, "'{}' has {} label(s); classification needs at least 2",
                   dataset.path().string(), dataset.num_labels());
  }

  double count(const loader::Batch& /*batch*/, const at::Tensor& keep) const override {
    return static_cast<double>(keep.sum().item<int64_t>());
  }

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
    const at::Tensor per_example = models::cross_entropy(logits, labels, at::Reduction::None);
    MicroBatchLoss out;
    out.sum = at::where(keep.to(acc.device()), per_example, at::zeros_like(per_example)).sum();
    out.count = count(batch, keep);
    return out;
  }

  Evaluation evaluate(models::Model& model, loader::ShardLoader& loader, const EvalContext& context) override {
    models::SequenceClassifier& classifier_model = classifier(model);
    const EvaluationResult result = train::evaluate(classifier_model, loader, context.comm, context.device,
                                                    context.nonfinite, context.autocast);
    const std::vector<std::string>& names = classifier_model.config().common.id2label;
    Evaluation out;
    out.metrics.loss = result.metrics.loss, out.metrics.examples = result.metrics.examples;
    out.metrics.scores = {{"accuracy", "accuracy", result.metrics.accuracy},
                          {"macro_f1", "macro-F1", result.metrics.macro_f1}};
    out.baseline = majority_of(result.matrix);
    out.report = metrics_to_json(result.metrics, result.matrix, names);
    out.table = format_metrics(result, names);
    return out;
  }

  std::string predictions(models::Model& model, loader::ShardLoader& loader, const EvalContext& context) override {
    models::SequenceClassifier& classifier_model = classifier(model);
    const std::vector<Prediction> predictions = predict(classifier_model, loader, context.comm, context.device);
    if (!context.comm.is_main_process()) return "";
    const int64_t n = loader.num_examples();
    HPCTRAIN_CHECK(static_cast<int64_t>(predictions.size()) == n, "gathered {} predictions for {} examples",
                   predictions.size(), n);
    const auto source_index = loader.reader().read_source_index(loader.options().split, 0, n);
    const std::vector<std::string>& names = classifier_model.config().common.id2label;
    std::string text;
    for (const Prediction& p : predictions) {
      const auto best = static_cast<std::size_t>(std::max_element(p.logits.begin(), p.logits.end()) - p.logits.begin());
      const nlohmann::json line = {{"index", p.index}, {"source_index", source_index[static_cast<std::size_t>(p.index)]},
                                   {"label", names[best]}, {"logits", p.logits}};
      text += line.dump() + "\n";
    }
    return text;
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
