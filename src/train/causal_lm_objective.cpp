// Causal language modelling (objective.hpp, Note [Objectives]): next-token cross-entropy summed over the
// predicted tokens of the kept rows, counted in tokens; evaluation reports the loss token-weighted over the
// whole split, its perplexity and the tokens; the lowest perplexity is best; `hpctrain predict` writes each
// row's summed loss and predicted tokens (with --logits also each predicted token's log-probability).
//
// Note [Causal-LM labels]
// A row of a causal-lm file is its tokens; the loader pads rows to the batch's longest on the right
// (attention_mask 0). Labels are the input ids with -100 on padding, on rows not trained on and on the first
// token of every document of a row packed from several (position_ids 0, Note [Document boundaries] in
// src/data/examples.cpp: it is not predicted from the previous document's last token, as transformers'
// DataCollatorWithFlattening labels it), and the model shifts them (CausalLM::next_token_loss, transformers'
// shift): a row of n tokens in d documents predicts n - d. So count() — the labels other than -100 after each
// row's first — is computed from the same labels on the host and equals the count the loss finds. The labels
// stay on the host: the loss finds the predicted positions there, without a device sync, and drops the others
// before the head (Note [Chunked loss] in models/loss.hpp). Rows without padding go to the model without a mask,
// so that the attention can take its unmasked path (SDPA's flash kernel on CUDA); rows packed from documents
// bring their position_ids (Note [Packed attention]).
// With a loss mask (prep sft, Note [Loss mask] in data/examples.hpp) a token is a label only where the mask is 1
// as well, as TRL's SFTTrainer sets labels to -100 where assistant_masks / completion_mask is 0; the two rules
// compose (a packed SFT row: a token is a label inside the mask and not at a document's first token).
#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "hpctrain/compat/torch.hpp"
#include "hpctrain/core/error.hpp"
#include "hpctrain/models/causal_lm.hpp"
#include "hpctrain/train/objective.hpp"

namespace hpctrain::train {
namespace {

models::CausalLM& causal_lm(models::Model& model) {
  auto* out = dynamic_cast<models::CausalLM*>(&model);
  HPCTRAIN_CHECK(out != nullptr, "a causal-lm dataset needs a causal language model (gpt2, llama, qwen2), not {}",
                 model.spec().architecture);
  return *out;
}

// Note [Causal-LM labels]: input ids, -100 on padding, on the rows `keep` (bool [B]) leaves out, on the first
// token of each document of a packed row and outside the loss mask if any.
at::Tensor token_labels(const loader::Batch& batch, const at::Tensor& keep) {
  at::Tensor trained = batch.attention_mask.to(at::kBool).logical_and(keep.unsqueeze(1));
  if (batch.position_ids.defined()) trained = trained.logical_and(batch.position_ids.ne(0));
  if (batch.loss_mask.defined()) trained = trained.logical_and(batch.loss_mask.to(at::kBool));
  return batch.input_ids.masked_fill(trained.logical_not(), models::kIgnoreIndex);
}

// The model's inputs on `device`: the mask only when a row is padded (Note [Causal-LM labels]).
models::ModelInputs lm_inputs(const loader::Batch& batch, const at::Device& device) {
  models::ModelInputs inputs;
  const bool pinned = batch.input_ids.is_pinned();
  inputs.input_ids = batch.input_ids.to(device, /*non_blocking=*/pinned);
  if (!batch.attention_mask.all().item<bool>()) inputs.attention_mask = batch.attention_mask.to(device, pinned);
  if (batch.position_ids.defined()) inputs.position_ids = batch.position_ids.to(device, pinned);
  return inputs;
}

// The next-token loss at each position, float32 [B, L] (0 where nothing is predicted), without the [B, L, V]
// logits (Note [Chunked loss]), the forward inside the autocast region when one is given; and the labels it used.
struct PositionLosses {
  at::Tensor loss;    // float32 [B, L] on the device
  at::Tensor labels;  // int64 [B, L] on the host, not shifted
};

PositionLosses position_losses(models::CausalLM& model, const loader::Batch& batch, const at::Tensor& keep,
                               const EvalContext& context, int64_t chunk_tokens) {
  models::ModelInputs inputs = lm_inputs(batch, context.device);
  inputs.labels = token_labels(batch, keep);
  std::optional<compat::AutocastScope> region;
  if (context.autocast) region.emplace(context.device.type(), true, *context.autocast);
  return {model.next_token_losses(inputs, chunk_tokens), inputs.labels};
}

// Per row: the next-token loss summed over its predicted tokens (float64, CPU) and their number.
struct RowLosses {
  at::Tensor sum;    // float64 [B]
  at::Tensor count;  // int64 [B]
};

RowLosses row_losses(models::CausalLM& model, const loader::Batch& batch, const at::Tensor& keep,
                     const EvalContext& context, int64_t chunk_tokens) {
  const PositionLosses losses = position_losses(model, batch, keep, context, chunk_tokens);
  RowLosses out;
  out.sum = losses.loss.to(at::kDouble).sum(1).cpu();
  out.count = models::shift_labels(losses.labels).ne(models::kIgnoreIndex).sum(1);
  return out;
}

// Collective: every kept row of one epoch of `loader` as [index, loss sum, tokens], gathered on rank 0 in
// the split's stored order (empty elsewhere). Rows whose loss is NaN/Inf are agreed on as evaluate() does.
std::vector<double> gather_row_losses(models::CausalLM& model, loader::ShardLoader& loader, const EvalContext& context,
                                      int64_t chunk_tokens) {
  EvalModeScope eval_mode(model);
  at::NoGradGuard no_grad;
  std::vector<double> rows;
  NonFiniteRows nonfinite;
  loader.start_epoch(0);
  while (auto batch = loader.next()) {
    const at::Tensor keep = batch->is_padding.logical_not();
    const RowLosses losses = row_losses(model, *batch, keep, context, chunk_tokens);
    const auto sum = losses.sum.accessor<double, 1>();
    const auto count = losses.count.accessor<int64_t, 1>();
    const auto index = batch->example_index.accessor<int64_t, 1>();
    const auto kept = keep.accessor<bool, 1>();
    for (int64_t row = 0; row < batch->size(); ++row) {
      if (!kept[row]) continue;
      if (!std::isfinite(sum[row])) {
        ++nonfinite.examples, nonfinite.first = std::min(nonfinite.first, index[row]);
        continue;
      }
      rows.insert(rows.end(), {static_cast<double>(index[row]), sum[row], static_cast<double>(count[row])});
    }
  }
  (void)agree_on_nonfinite(context.comm, nonfinite, "evaluation", context.nonfinite);
  std::vector<double> all = gather_rows(context.comm, std::move(rows));
  // Sorted by example index: the sum below adds in the same order on any number of ranks.
  std::vector<std::array<double, 3>> sorted(all.size() / 3);
  for (std::size_t i = 0; i < sorted.size(); ++i) sorted[i] = {all[3 * i], all[3 * i + 1], all[3 * i + 2]};
  std::sort(sorted.begin(), sorted.end());
  for (std::size_t i = 0; i < sorted.size(); ++i) std::copy(sorted[i].begin(), sorted[i].end(), all.begin() + 3 * i);
  return all;
}

// Collective, for `predict --logits`: each kept row's log-probability of every predicted token (position t's
// log_softmax at token t + 1: minus its loss, from the same loss module, Note [Chunked loss]), gathered on rank 0
// by example index (empty elsewhere). The sum of a row's values is minus its loss_sum.
std::map<int64_t, std::vector<double>> gather_token_logprobs(models::CausalLM& model, loader::ShardLoader& loader,
                                                              const EvalContext& context, int64_t chunk_tokens) {
  EvalModeScope eval_mode(model);
  at::NoGradGuard no_grad;
  std::vector<double> flat;  // per row: index, count, the count log-probabilities
  loader.start_epoch(0);
  while (auto batch = loader.next()) {
    const at::Tensor keep = batch->is_padding.logical_not();
    const PositionLosses losses = position_losses(model, *batch, keep, context, chunk_tokens);
    const at::Tensor chosen = losses.loss.neg().to(at::kDouble).cpu();
    const at::Tensor predicted = models::shift_labels(losses.labels).ne(models::kIgnoreIndex);
    for (int64_t row = 0; row < batch->size(); ++row) {
      if (!keep[row].item<bool>()) continue;
      const at::Tensor values = chosen[row].index({predicted[row]}).contiguous();
      flat.push_back(static_cast<double>(batch->example_index[row].item<int64_t>()));
      flat.push_back(static_cast<double>(values.numel()));
      flat.insert(flat.end(), values.data_ptr<double>(), values.data_ptr<double>() + values.numel());
    }
  }
  const std::vector<double> all = gather_rows(context.comm, std::move(flat));
  std::map<int64_t, std::vector<double>> by_index;
  for (std::size_t at = 0; at < all.size();) {
    const auto count = static_cast<std::size_t>(all[at + 1]);
    by_index[static_cast<int64_t>(all[at])].assign(all.begin() + static_cast<std::ptrdiff_t>(at + 2),
                                                   all.begin() + static_cast<std::ptrdiff_t>(at + 2 + count));
    at += 2 + count;
  }
  return by_index;
}

class CausalLanguageModelling final : public Objective {
 public:
  explicit CausalLanguageModelling(int64_t loss_chunk_tokens) : chunk_tokens_(loss_chunk_tokens) {}

  double count(const loader::Batch& batch, const at::Tensor& keep) const override {
    // Note [Causal-LM labels]: position t predicts label t + 1, so column 0's label is never a target.
    const at::Tensor targets = token_labels(batch, keep).slice(1, 1);
    return static_cast<double>(targets.ne(models::kIgnoreIndex).sum().item<int64_t>());
  }

  MicroBatchLoss loss(models::Model& model, const loader::Batch& batch, const at::Tensor& keep,
                      const Accelerator& acc) override {
    models::CausalLM& lm = causal_lm(model);
    models::ModelInputs inputs = lm_inputs(batch, acc.device());
    inputs.labels = token_labels(batch, keep);  // on the host (Note [Causal-LM labels])
    models::TokenLossSum loss;
    {
      // --mixed-precision: the forward's and the head's matrix products; the loss's log-sum-exp in fp32.
      const AutocastRegion region = acc.autocast();
      loss = lm.next_token_loss(inputs, chunk_tokens_);
    }
    return MicroBatchLoss{loss.sum, count(batch, keep)};
  }

  Evaluation evaluate(models::Model& model, loader::ShardLoader& loader, const EvalContext& context) override {
    const std::vector<double> rows = gather_row_losses(causal_lm(model), loader, context, chunk_tokens_);
    double totals[3] = {0, 0, 0};  // loss sum, tokens, examples: summed on rank 0, then broadcast
    for (std::size_t at = 0; at < rows.size(); at += 3) totals[0] += rows[at + 1], totals[1] += rows[at + 2], ++totals[2];
    context.comm.broadcast(totals, sizeof totals, 0);
    Evaluation out;
    const auto tokens = static_cast<int64_t>(totals[1]);
    out.metrics.loss = tokens > 0 ? totals[0] / totals[1] : 0.0;
    out.metrics.examples = static_cast<int64_t>(totals[2]);
    const double perplexity = std::exp(out.metrics.loss);
    out.metrics.scores = {{"perplexity", "perplexity", perplexity}};
    out.report = {{"loss", out.metrics.loss}, {"perplexity", perplexity}, {"tokens", tokens},
                  {"examples", out.metrics.examples}};
    out.table = fmt::format("examples {}  tokens {}  loss {:.4f}  perplexity {:.4f}\n", out.metrics.examples, tokens,
                            out.metrics.loss, perplexity);
    return out;
  }

  std::string predictions(models::Model& model, loader::ShardLoader& loader, const EvalContext& context) override {
    const std::vector<double> rows = gather_row_losses(causal_lm(model), loader, context, chunk_tokens_);
    const auto logprobs = context.logits ? gather_token_logprobs(causal_lm(model), loader, context, chunk_tokens_)
                                         : std::map<int64_t, std::vector<double>>{};
    if (!context.comm.is_main_process()) return "";
    const int64_t n = loader.num_examples();
    HPCTRAIN_CHECK(static_cast<int64_t>(rows.size() / 3) == n, "gathered {} predictions for {} examples", rows.size() / 3, n);
    const auto source_index = loader.reader().read_source_index(loader.options().split, 0, n);
    std::string text;
    for (std::size_t at = 0; at < rows.size(); at += 3) {
      const auto index = static_cast<int64_t>(rows[at]), tokens = static_cast<int64_t>(rows[at + 2]);
      nlohmann::json line = {{"index", index}, {"source_index", source_index[static_cast<std::size_t>(index)]},
                             {"loss_sum", rows[at + 1]}, {"tokens", tokens},
                             {"loss", tokens > 0 ? nlohmann::json(rows[at + 1] / rows[at + 2]) : nlohmann::json()}};
      if (context.logits) line["logprobs"] = logprobs.at(index);  // predict --logits
      text += line.dump() + "\n";
    }
    return text;
  }

  std::string best_metric() const override { return "perplexity"; }
  bool greater_is_better() const override { return false; }

  std::string describe(const Evaluation& e) const override {
    return fmt::format("perplexity {:.4f}, loss {:.4f} over {} tokens in {} examples",
                       e.metrics.score("perplexity").value_or(0), e.metrics.loss,
                       e.report.value("tokens", int64_t{0}), e.metrics.examples);
  }

 private:
  int64_t chunk_tokens_;  // --loss-chunk-tokens (Note [Chunked loss])
};

}  // namespace

std::unique_ptr<Objective> make_causal_lm_objective(int64_t loss_chunk_tokens) {
  models::check_loss_chunk_tokens(loss_chunk_tokens);
  return std::make_unique<CausalLanguageModelling>(loss_chunk_tokens);
}

}  // namespace hpctrain::train
