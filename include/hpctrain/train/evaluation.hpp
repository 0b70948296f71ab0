// Evaluation and prediction over a split read by every rank's ShardLoader, exact across ranks:
// wrap-around padding examples (Batch::is_padding) are dropped, so every example counts exactly once.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <functional>
#include <limits>
#include <optional>
#include <vector>

#include <torch/nn/module.h>

#include "hpctrain/dist/comm.hpp"
#include "hpctrain/loader/batch.hpp"
#include "hpctrain/loader/shard_loader.hpp"
#include "hpctrain/models/model.hpp"
#include "hpctrain/train/metrics.hpp"

namespace hpctrain::train {

// A batch's tensors on `device`, as the model takes them (labels included: the loss comes back too).
models::ModelInputs to_model_inputs(const loader::Batch& batch, const at::Device& device);

struct EvaluationResult {
  ConfusionMatrix matrix;
  ClassificationMetrics metrics;  // metrics.loss: mean cross-entropy over the split
  int64_t nonfinite_examples = 0;  // examples with NaN/Inf logits (left out of the metrics), over all ranks
};

// What evaluate() does with examples whose logits are NaN/Inf: `fail` throws the same Error on every rank
// (how many, and the first example index); `count` leaves them out of the metrics and counts them (training
// with --skip-nonfinite evaluates a model that may hold such weights).
enum class NonFinite { fail, count };

// Puts a model in eval mode for a scope and restores its mode afterwards.
class EvalModeScope {
 public:
  explicit EvalModeScope(torch::nn::Module& model) : model_(model), was_training_(model.is_training()) { model_.eval(); }
  ~EvalModeScope() { model_.train(was_training_); }
  EvalModeScope(const EvalModeScope&) = delete;
  EvalModeScope& operator=(const EvalModeScope&) = delete;

 private:
  torch::nn::Module& model_;
  bool was_training_;
};

// Examples that gave NaN/Inf (logits or loss), counted per rank.
struct NonFiniteRows {
  int64_t examples = 0;
  int64_t first = std::numeric_limits<int64_t>::max();  // smallest example index (position in the split)
};

// Collective. Every rank reduces the same counts and so takes the same decision: all ranks throw the same
// Error (policy `fail`, naming `what`, how many examples and the first) or none does (the agreement Note
// [Agree on the first failure] asks for, with global figures). Returns the number of such examples over all
// ranks (with `count` they are left out, and a warning says so).
int64_t agree_on_nonfinite(dist::Comm& comm, NonFiniteRows seen, const char* what, NonFinite policy);

// Runs the model (eval mode, no grad; its training mode is restored) over one epoch of `loader` on every
// rank; confusion matrix and loss are summed across ranks. Collective. `autocast`: the dtype of an autocast
// region around each forward (training under --mixed-precision evaluates in it too, as a model prepared by
// Accelerate does); the logits and the loss are computed in float32 either way.
EvaluationResult evaluate(models::SequenceClassifier& model, loader::ShardLoader& loader, dist::Comm& comm,
                          const at::Device& device, NonFinite nonfinite = NonFinite::fail,
                          std::optional<c10::ScalarType> autocast = std::nullopt);

// Collective: every rank's `rows` (any number of doubles) concatenated in rank order, on rank 0 (empty on
// the other ranks). Exact for integers below 2^53 (example indices, counts).
std::vector<double> gather_rows(dist::Comm& comm, std::vector<double> rows);

// One example's prediction.
struct Prediction {
  int64_t index = 0;            // position in the split as stored
  int64_t label = 0;            // the true label
  std::vector<float> logits;
};

// Predictions of every example of the split, gathered on rank 0 in the split's stored order
// (other ranks receive an empty vector). NaN/Inf logits throw on every rank, as NonFinite::fail. Collective.
std::vector<Prediction> predict(models::SequenceClassifier& model, loader::ShardLoader& loader, dist::Comm& comm,
                                const at::Device& device);

}  // namespace hpctrain::train
