// Evaluation and prediction over a split read by every rank's ShardLoader, exact across ranks:
// wrap-around padding examples (Batch::is_padding) are dropped, so every example counts exactly once.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <functional>
#include <optional>
#include <vector>

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

// Runs the model (eval mode, no grad; its training mode is restored) over one epoch of `loader` on every
// rank; confusion matrix and loss are summed across ranks. Collective. `autocast`: the dtype of an autocast
// region around each forward (training under --mixed-precision evaluates in it too, as a model prepared by
// Accelerate does); the logits and the loss are computed in float32 either way.
EvaluationResult evaluate(models::SequenceClassifier& model, loader::ShardLoader& loader, dist::Comm& comm,
                          const at::Device& device, NonFinite nonfinite = NonFinite::fail,
                          std::optional<c10::ScalarType> autocast = std::nullopt);

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
