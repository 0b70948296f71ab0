#include "hpctrain/train/metrics.hpp"

#include <algorithm>
#include <numeric>

#include "hpctrain/core/error.hpp"

namespace hpctrain::train {

ConfusionMatrix::ConfusionMatrix(int64_t num_labels)
    : num_labels_(num_labels), counts_(static_cast<std::size_t>(num_labels * num_labels), 0) {
  HPCTRAIN_CHECK(num_labels > 0, "a confusion matrix needs at least one label, got {}", num_labels);
}

void ConfusionMatrix::add(int64_t label, int64_t predicted) {
  HPCTRAIN_CHECK(label >= 0 && label < num_labels_, "label {} outside [0, {})", label, num_labels_);
  HPCTRAIN_CHECK(predicted >= 0 && predicted < num_labels_, "prediction {} outside [0, {})", predicted, num_labels_);
  ++counts_[static_cast<std::size_t>(label * num_labels_ + predicted)];
}

int64_t ConfusionMatrix::count(int64_t label, int64_t predicted) const {
  return counts_[static_cast<std::size_t>(label * num_labels_ + predicted)];
}

int64_t ConfusionMatrix::total() const { return std::accumulate(counts_.begin(), counts_.end(), int64_t{0}); }

ClassificationMetrics compute_metrics(const ConfusionMatrix& matrix) {
  ClassificationMetrics metrics;
  const int64_t k = matrix.num_labels();
  metrics.examples = matrix.total();
  int64_t correct = 0;
  double f1_sum = 0;
  for (int64_t c = 0; c < k; ++c) {
    int64_t predicted = 0, actual = 0;
    for (int64_t other = 0; other < k; ++other) {
      predicted += matrix.count(other, c);
      actual += matrix.count(c, other);
    }
    const int64_t hits = matrix.count(c, c);
    correct += hits;
    ClassMetrics m;
    m.support = actual;
    m.precision = predicted > 0 ? static_cast<double>(hits) / static_cast<double>(predicted) : 0.0;
    m.recall = actual > 0 ? static_cast<double>(hits) / static_cast<double>(actual) : 0.0;
    m.f1 = m.precision + m.recall > 0 ? 2 * m.precision * m.recall / (m.precision + m.recall) : 0.0;
    f1_sum += m.f1;
    metrics.per_class.push_back(m);
  }
  metrics.accuracy = metrics.examples > 0 ? static_cast<double>(correct) / static_cast<double>(metrics.examples) : 0.0;
  metrics.macro_f1 = f1_sum / static_cast<double>(k);
  return metrics;
}

nlohmann::json metrics_to_json(const ClassificationMetrics& metrics, const ConfusionMatrix& matrix,
                               const std::vector<std::string>& label_names) {
  nlohmann::json per_class = nlohmann::json::array();
  for (std::size_t c = 0; c < metrics.per_class.size(); ++c) {
    const auto& m = metrics.per_class[c];
    per_class.push_back({{"label", c < label_names.size() ? label_names[c] : std::to_string(c)},
                         {"precision", m.precision}, {"recall", m.recall}, {"f1", m.f1}, {"support", m.support}});
  }
  nlohmann::json rows = nlohmann::json::array();
  for (int64_t label = 0; label < matrix.num_labels(); ++label) {
    std::vector<int64_t> row;
    for (int64_t predicted = 0; predicted < matrix.num_labels(); ++predicted) row.push_back(matrix.count(label, predicted));
    rows.push_back(row);
  }
  return {{"examples", metrics.examples}, {"loss", metrics.loss}, {"accuracy", metrics.accuracy},
          {"macro_f1", metrics.macro_f1}, {"per_class", per_class}, {"confusion_matrix", rows}};
}

double majority_baseline(const std::vector<int64_t>& label_counts) {
  const int64_t total = std::accumulate(label_counts.begin(), label_counts.end(), int64_t{0});
  if (total == 0) return 0.0;
  return static_cast<double>(*std::max_element(label_counts.begin(), label_counts.end())) / static_cast<double>(total);
}

}  // namespace hpctrain::train
