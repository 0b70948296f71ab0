// Classification metrics from a confusion matrix of exact counts (so ranks can sum their matrices).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace hpctrain::train {

class ConfusionMatrix {
 public:
  explicit ConfusionMatrix(int64_t num_labels);
  void add(int64_t label, int64_t predicted);  // labels outside [0, num_labels) → Error
  int64_t num_labels() const { return num_labels_; }
  int64_t count(int64_t label, int64_t predicted) const;
  int64_t total() const;
  // Row-major counts [label][predicted]: what ranks allreduce (sum).
  std::vector<int64_t>& counts() { return counts_; }
  const std::vector<int64_t>& counts() const { return counts_; }

 private:
  int64_t num_labels_;
  std::vector<int64_t> counts_;
};

struct ClassMetrics {
  double precision = 0, recall = 0, f1 = 0;
  int64_t support = 0;
};

struct ClassificationMetrics {
  int64_t examples = 0;
  double loss = 0;  // mean cross-entropy (filled by the caller)
  double accuracy = 0;
  double macro_f1 = 0;  // mean F1 over classes (a class with no support and no predictions counts as 0, as scikit-learn)
  std::vector<ClassMetrics> per_class;
};

ClassificationMetrics compute_metrics(const ConfusionMatrix& matrix);

// {"loss", "accuracy", "macro_f1", "examples", "per_class": [{label, precision, recall, f1, support}], "confusion_matrix"}.
nlohmann::json metrics_to_json(const ClassificationMetrics& metrics, const ConfusionMatrix& matrix,
                               const std::vector<std::string>& label_names);

// Majority-class baseline accuracy of a label histogram (what always predicting the most common label scores).
double majority_baseline(const std::vector<int64_t>& label_counts);

}  // namespace hpctrain::train
