// Causal language modelling (objective.hpp, Note [Objectives]): next-token cross-entropy summed over the
// predicted tokens of the kept rows, counted in tokens; evaluation reports the loss token-weighted over the
// whole split, its perplexity and the tokens; the lowest perplexity is best; `hpctrain predict` writes each
// row's summed loss and predicted tokens.
//
// Note [Causal-LM labels]
// A row of a causal-lm file is its tokens; the loader pads rows to the batch's longest on the right
// (attention_mask 0). Labels are the input ids with -100 on padding and on rows not trained on, and the
// model shifts them (CausalLM::next_token_loss, transformers' shift): a row of n tokens predicts n - 1. So
// count() — the row's tokens minus one, over the kept rows — is read from the attention mask on the host
// and equals the count the loss finds. The labels stay on the host: the loss finds the predicted positions
// there, without a device sync, and drops the others before the head (Note [Chunked loss] in models/loss.hpp).
// Packed rows (no padding) go to the model without a mask, so that the attention can take its unmasked path
// (SDPA's flash kernel on CUDA).
#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cmath>
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

// Note [Causal-LM labels]: input ids, -100 on padding and on the rows `keep` (bool [B]) leaves out.
at::Tensor token_labels(const loader::Batch& batch, const at::Tensor& keep) {
  const at::Tensor trained = batch.attention_mask.to(at::kBool).logical_and(keep.unsqueeze(1));
  return batch.input_ids.masked_fill(trained.logical_not(), models::kIgnoreIndex);
}

// The model's inputs on `device`: the mask only when a row is padded (Note [Causal-LM labels]).
models::ModelInputs lm_inputs(const loader::Batch& batch, const at::Device& device) {
  models::ModelInputs inputs;
  const bool pinned = batch.input_ids.is_pinned();
  inputs.input_ids = batch.input_ids.to(device, /*non_blocking=*/pinned);
  if (!batch.attention_mask.all().item<bool>()) inputs.attention_mask = batch.attention_mask.to(device, pinned);
  return inputs;
}

// Per row: the next-token loss summed over its predicted tokens (float64, CPU) and their number, without the
// [B, L, V] logits (Note [Chunked loss]), the forward inside the autocast region when one is given.
struct RowLosses {
  at::Tensor sum;    // float64 [B]
  at::Tensor count;  // int64 [B]
};

RowLosses row_losses(models::CausalLM& model, const loader::Batch& batch, const at::Tensor& keep,
                     const EvalContext& context, int64_t chunk_tokens) {
  models::ModelInputs inputs = lm_inputs(batch, context.device);
  inputs.labels = token_labels(batch, keep);
  at::Tensor per_token;
  {
    std::optional<compat::AutocastScope> region;
    if (context.autocast) region.emplace(context.device.type(), true, *context.autocast);
    per_token = model.next_token_losses(inputs, chunk_tokens);
  }
  RowLosses out;
  out.sum = per_token.to(at::kDouble).sum(1).cpu();
  out.count = models::shift_labels(inputs.labels).ne(models::kIgnoreIndex).sum(1);
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

class CausalLanguageModelling final : public Objective {
 public:
  explicit CausalLanguageModelling(int64_t loss_chunk_tokens) : chunk_tokens_(loss_chunk_tokens) {}

  double count(const loader::Batch& batch, const at::Tensor& keep) const override {
    const at::Tensor tokens = batch.attention_mask.sum(1);
    return static_cast<double>(at::where(keep, (tokens - 1).clamp_min(0), at::zeros_like(tokens)).sum().item<int64_t>());
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
    if (!context.comm.is_main_process()) return "";
    const int64_t n = loader.num_examples();
    HPCTRAIN_CHECK(static_cast<int64_t>(rows.size() / 3) == n, "gathered {} predictions for {} examples", rows.size() / 3, n);
    const auto source_index = loader.reader().read_source_index(loader.options().split, 0, n);
    std::string text;
    for (std::size_t at = 0; at < rows.size(); at += 3) {
      const auto index = static_cast<int64_t>(rows[at]), tokens = static_cast<int64_t>(rows[at + 2]);
      const nlohmann::json line = {{"index", index}, {"source_index", source_index[static_cast<std::size_t>(index)]},
                                   {"loss_sum", rows[at + 1]}, {"tokens", tokens},
                                   {"loss", tokens > 0 ? nlohmann::json(rows[at + 1] / rows[at + 2]) : nlohmann::json()}};
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
