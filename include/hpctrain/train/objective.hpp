// The task seam: a training objective owns how a batch becomes a loss, what evaluation reports, which
// evaluation is best and what `hpctrain predict` writes. `hpctrain train` (trainer.cpp) and custom loops call it; the step protocol
// (Accelerator::optimizer_step) and the log sinks never see the task.
//
// Note [Objectives]
// A micro-batch's loss is a *sum* over the units the objective counts (rows for classification, predicted
// tokens for a causal LM); count() says how many units a micro-batch holds from the batch alone, on the
// host, before any forward. The trainer reads a step's k micro-batches first, sums their counts over the
// micro-batches and (with the first micro-batch's allreduce) over the ranks, and back-propagates
// local_sum * W / step_count, so the step's gradient is that of the mean loss per unit over the whole
// global batch, whatever the number of ranks and accumulation steps and however the units fall on them
// (1 rank x batch 8, 2 ranks x 2 x accumulation 2 and 1 x 1 x accumulation 8 take the same step even when
// the micro-batches hold different numbers of tokens: transformers' gradient-accumulation loss bug, #34191).
// The trainer decides which rows count (`keep`: not padding duplicates, not rows before a resume position,
// Note [Resume position]); the objective decides what each kept row contributes. Evaluation is collective
// and exact across ranks (every example once).
// A new objective is a new file (a class derived from Objective) and its task's case in make_objective().
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>
#include <nlohmann/json.hpp>

#include <memory>
#include <optional>
#include <string>

#include "hpctrain/data/dataset_reader.hpp"
#include "hpctrain/dist/comm.hpp"
#include "hpctrain/loader/batch.hpp"
#include "hpctrain/loader/shard_loader.hpp"
#include "hpctrain/models/model.hpp"
#include "hpctrain/train/accelerator.hpp"
#include "hpctrain/train/eval_metrics.hpp"
#include "hpctrain/train/evaluation.hpp"

namespace hpctrain::train {

// One micro-batch's loss on this rank.
struct MicroBatchLoss {
  at::Tensor sum;    // device scalar (float32, with grad): the loss summed over the units counted
  double count = 0;  // the units the sum is over
};

struct Evaluation {
  EvalMetrics metrics;
  // What a trivial predictor scores on best_metric() (classification: always the majority class); nullopt
  // when the objective has none.
  std::optional<double> baseline;
  nlohmann::json report;  // the objective's whole report, as `hpctrain eval --json` prints it
  std::string table;      // the same for a terminal, as `hpctrain eval` prints it
};

// Where and how an evaluation runs: every rank of `comm`, the model on `device`, forward inside an autocast
// region of `autocast` when set (training under --mixed-precision evaluates in it too).
struct EvalContext {
  dist::Comm& comm;
  at::Device device;
  NonFinite nonfinite = NonFinite::fail;
  std::optional<c10::ScalarType> autocast;
  // predict --logits: a causal LM's lines add "logprobs", each predicted token's log-probability (a classifier's
  // lines carry their logits always).
  bool logits = false;
};

class Objective {
 public:
  virtual ~Objective() = default;

  // Before training on `dataset`: Error when the objective cannot learn from it (classification: fewer than
  // two labels).
  virtual void check_trainable(const data::DatasetReader& /*dataset*/) const {}
  // The units the loss of `batch` sums over when `keep` (bool [B], CPU) marks the rows trained on: read
  // from the batch on the host, no forward, no device sync (Note [Objectives]).
  [[nodiscard]] virtual double count(const loader::Batch& batch, const at::Tensor& keep) const = 0;
  // Forward of `batch` on acc.device() inside acc.autocast(), and the loss summed over the rows `keep`
  // (bool [B], CPU) marks; its count is count(batch, keep). Not collective.
  [[nodiscard]] virtual MicroBatchLoss loss(models::Model& model, const loader::Batch& batch, const at::Tensor& keep,
                                            const Accelerator& acc) = 0;
  // Collective: one epoch of `loader` on every rank (eval mode, no grad), exact across ranks.
  [[nodiscard]] virtual Evaluation evaluate(models::Model& model, loader::ShardLoader& loader, const EvalContext& context) = 0;
  // Collective: what `hpctrain predict` writes for the split `loader` reads, one JSON line per example in the
  // stored order, on rank 0 ("" on the other ranks).
  [[nodiscard]] virtual std::string predictions(models::Model& model, loader::ShardLoader& loader,
                                                const EvalContext& context) = 0;
  // The score that picks the best checkpoint (trainer_state.json "best_metric"), and its direction.
  [[nodiscard]] virtual std::string best_metric() const = 0;
  [[nodiscard]] virtual bool greater_is_better() const { return true; }
  // One line for the log at the end of training: the scores, the baseline, the loss and the examples.
  [[nodiscard]] virtual std::string describe(const Evaluation& evaluation) const = 0;

  // Whether an evaluation scoring `candidate` is better than the best so far.
  [[nodiscard]] bool improves(double candidate, const std::optional<double>& best) const {
    return !best || (greater_is_better() ? candidate > *best : candidate < *best);
  }
};

// An Accelerator's evaluation context: its ranks, device and autocast dtype.
[[nodiscard]] inline EvalContext eval_context(Accelerator& acc, NonFinite nonfinite = NonFinite::fail) {
  return EvalContext{acc.comm(), acc.device(), nonfinite, acc.precision().autocast_dtype()};
}

// Classification (classification_objective.cpp): cross-entropy over rows, accuracy and macro-F1, the most
// accurate evaluation is best.
[[nodiscard]] std::unique_ptr<Objective> make_classification_objective();
// Causal language modelling (causal_lm_objective.cpp): next-token cross-entropy over predicted tokens,
// perplexity; the lowest perplexity is best.
[[nodiscard]] std::unique_ptr<Objective> make_causal_lm_objective();
// The objective of a dataset's task (objective.cpp): classification for text and image classification
// files, causal language modelling for causal-lm files. Called as soon as the dataset is open.
[[nodiscard]] std::unique_ptr<Objective> make_objective(const data::DatasetReader& dataset);

}  // namespace hpctrain::train
