// evaluate() and predict() over a split on every rank; non-finite logits fail on every rank (evaluation.hpp).
#include "hpctrain/train/evaluation.hpp"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <limits>

#include "hpctrain/compat/torch.hpp"
#include "hpctrain/core/error.hpp"
#include "hpctrain/core/log.hpp"
#include "hpctrain/models/loss.hpp"

namespace hpctrain::train {
namespace {

at::Tensor on(const at::Tensor& tensor, const at::Device& device) {
  // A pinned batch (LoaderOptions::pin_memory) is copied asynchronously; the device's stream orders its use.
  return tensor.defined() ? tensor.to(device, /*non_blocking=*/tensor.is_pinned()) : tensor;
}

// Counts the rows of `logits` [rows, labels] with a non-finite value; `example_index` [rows] names them.
// Returns the mask of the finite rows.
at::Tensor note_nonfinite(const at::Tensor& logits, const at::Tensor& example_index, NonFiniteRows& seen) {
  const at::Tensor finite = at::isfinite(logits).all(1);
  const at::Tensor bad = finite.logical_not();
  const int64_t count = bad.sum().item<int64_t>();
  if (count > 0) {
    seen.examples += count;
    seen.first = std::min(seen.first, example_index.index({bad}).min().item<int64_t>());
  }
  return finite;
}

}  // namespace

int64_t agree_on_nonfinite(dist::Comm& comm, NonFiniteRows seen, const char* what, NonFinite policy) {
  seen.examples = comm.allreduce_value(seen.examples);
  seen.first = comm.allreduce_value(seen.first, dist::ReduceOp::min);
  HPCTRAIN_CHECK(seen.examples == 0 || policy == NonFinite::count, "{}: the model gave NaN/Inf logits for {} "
                 "example(s) of the split (the first is example {})\n  hint: the weights in MODEL hold NaN/Inf values "
                 "or overflow: inspect them, or use an earlier checkpoint", what, seen.examples, seen.first);
  if (seen.examples > 0)
    log::warning("{}: {} example(s) gave NaN/Inf logits (the first is example {}); they are left out of the metrics",
                 what, seen.examples, seen.first);
  return seen.examples;
}

// Note [No mask without padding]
// On a GPU a batch without padding goes to the model without attention_mask: attention then passes SDPA no
// mask, which makes the flash kernel eligible (it takes no float bias); an all-ones mask would only add zeros.
// Checked on the host batch, before the copy, so it costs no device read. CPU batches keep their mask (the
// blocked attention path is unchanged). Models treat an undefined mask as "no padding".
models::ModelInputs to_model_inputs(const loader::Batch& batch, const at::Device& device) {
  models::ModelInputs inputs;
  inputs.input_ids = on(batch.input_ids, device);
  const bool drop_mask = device.is_cuda() && batch.attention_mask.defined() && batch.attention_mask.is_cpu() &&
                         batch.attention_mask.ne(0).all().item<bool>();
  if (!drop_mask) inputs.attention_mask = on(batch.attention_mask, device);
  inputs.token_type_ids = on(batch.token_type_ids, device);
  inputs.pixel_values = on(batch.pixel_values, device);
  inputs.labels = on(batch.labels, device);
  return inputs;
}

EvaluationResult evaluate(models::SequenceClassifier& model, loader::ShardLoader& loader, dist::Comm& comm,
                          const at::Device& device, NonFinite policy, std::optional<c10::ScalarType> autocast) {
  EvalModeScope eval_mode(model);
  at::NoGradGuard no_grad;
  ConfusionMatrix matrix(model.num_labels());
  double loss_sum = 0;
  NonFiniteRows nonfinite;
  loader.start_epoch(0);
  while (auto batch = loader.next()) {
    models::ModelInputs inputs = to_model_inputs(*batch, device);
    inputs.labels = at::Tensor();  // per-example losses below, not the model's batch mean
    at::Tensor logits;
    {
      std::optional<compat::AutocastScope> region;
      if (autocast) region.emplace(device.type(), true, *autocast);
      logits = model.forward(inputs).logits.to(at::kFloat).cpu();
    }
    HPCTRAIN_CHECK(logits.size(1) == model.num_labels(), "the model gives {} logits but has {} labels", logits.size(1),
                   model.num_labels());
    const at::Tensor kept = batch->is_padding.logical_not();
    const at::Tensor finite = note_nonfinite(logits.index({kept}), batch->example_index.index({kept}), nonfinite);
    const at::Tensor keep = kept.clone().index_put_({kept}, finite);
    const at::Tensor labels = batch->labels.index({keep});
    const at::Tensor kept_logits = logits.index({keep});
    if (labels.numel() == 0) continue;
    loss_sum += models::cross_entropy(kept_logits, labels, at::Reduction::Sum).item<double>();
    const at::Tensor predicted = kept_logits.argmax(1);
    const auto* label = labels.data_ptr<int64_t>();
    const auto* guess = predicted.data_ptr<int64_t>();
    for (int64_t i = 0; i < labels.numel(); ++i) matrix.add(label[i], guess[i]);
  }
  const int64_t nonfinite_examples = agree_on_nonfinite(comm, nonfinite, "evaluation", policy);
  comm.allreduce(matrix.counts().data(), matrix.counts().size());
  comm.allreduce(&loss_sum, 1);
  EvaluationResult result{matrix, compute_metrics(matrix), nonfinite_examples};
  result.metrics.loss = result.metrics.examples > 0 ? loss_sum / static_cast<double>(result.metrics.examples) : 0.0;
  return result;
}

std::vector<double> gather_rows(dist::Comm& comm, std::vector<double> rows) {
  // Variable sizes: agree on the largest, pad, gather, trim.
  const auto counts = comm.allgather_value<int64_t>(static_cast<int64_t>(rows.size()));
  const int64_t longest = *std::max_element(counts.begin(), counts.end());
  rows.resize(static_cast<std::size_t>(longest), 0.0);
  std::vector<double> all(static_cast<std::size_t>(longest * comm.world_size()));
  comm.allgather(rows.data(), static_cast<std::size_t>(longest) * sizeof(double), all.data());
  std::vector<double> out;
  if (!comm.is_main_process()) return out;
  for (int r = 0; r < comm.world_size(); ++r) {
    const auto first = all.begin() + static_cast<std::ptrdiff_t>(r * longest);
    out.insert(out.end(), first, first + counts[static_cast<std::size_t>(r)]);
  }
  return out;
}

std::vector<Prediction> predict(models::SequenceClassifier& model, loader::ShardLoader& loader, dist::Comm& comm,
                                const at::Device& device) {
  EvalModeScope eval_mode(model);
  at::NoGradGuard no_grad;
  const int64_t k = model.num_labels();
  // Rows of [index, label, logits...] as doubles (exact for indices below 2^53), for one allgather.
  std::vector<double> rows;
  NonFiniteRows nonfinite;
  loader.start_epoch(0);
  while (auto batch = loader.next()) {
    models::ModelInputs inputs = to_model_inputs(*batch, device);
    inputs.labels = at::Tensor();
    const at::Tensor logits = model.forward(inputs).logits.to(at::kFloat).cpu().contiguous();
    const at::Tensor kept = batch->is_padding.logical_not();
    (void)note_nonfinite(logits.index({kept}), batch->example_index.index({kept}), nonfinite);
    for (int64_t i = 0; i < batch->size(); ++i) {
      if (batch->is_padding[i].item<bool>()) continue;
      rows.push_back(static_cast<double>(batch->example_index[i].item<int64_t>()));
      rows.push_back(static_cast<double>(batch->labels[i].item<int64_t>()));
      const float* row = logits.data_ptr<float>() + i * k;
      rows.insert(rows.end(), row, row + k);
    }
  }
  (void)agree_on_nonfinite(comm, nonfinite, "prediction", NonFinite::fail);
  const std::vector<double> all = gather_rows(comm, rows);
  std::vector<Prediction> predictions;
  if (!comm.is_main_process()) return predictions;
  const auto width = static_cast<std::size_t>(2 + k);
  for (std::size_t at = 0; at < all.size(); at += width) {
    Prediction p;
    p.index = static_cast<int64_t>(all[at]);
    p.label = static_cast<int64_t>(all[at + 1]);
    p.logits.assign(all.begin() + static_cast<std::ptrdiff_t>(at + 2), all.begin() + static_cast<std::ptrdiff_t>(at + width));
    predictions.push_back(std::move(p));
  }
  std::sort(predictions.begin(), predictions.end(), [](const Prediction& a, const Prediction& b) { return a.index < b.index; });
  return predictions;
}

}  // namespace hpctrain::train
