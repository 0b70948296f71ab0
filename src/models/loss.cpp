// Cross-entropy from logits and through a language model's head (loss.hpp): the kept tokens are selected here,
// the chunks run in chunked_cross_entropy.cpp.
#include "hpctrain/models/loss.hpp"

#include "hpctrain/core/error.hpp"
#include "hpctrain/models/lora.hpp"
#include "hpctrain/models/quantized_linear.hpp"
#include "models/chunked_cross_entropy.hpp"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

namespace hpctrain::models {

namespace {

// hidden @ weight^T, or through the 4-bit head when `quantized` is given (Note [Quantized embeddings]).
at::Tensor head_linear(const at::Tensor& hidden, const at::Tensor& weight, const Quant4Weight* quantized) {
  return quantized != nullptr ? quantized_linear(hidden, *quantized, at::Tensor()) : at::linear(hidden, weight);
}

}  // namespace

at::Tensor LmHead::logits(const at::Tensor& hidden) const {
  at::Tensor out = head_linear(hidden, weight, quantized ? &*quantized : nullptr);
  if (adapter == nullptr) return out;
  const LoraTarget::LowRank lora = adapter->lora_factors(hidden, training);
  return out + at::linear(lora.input, lora.weight);
}

namespace {

// The targets that are predicted (not kIgnoreIndex) of a flat target tensor, found on the targets' device.
struct KeptTokens {
  at::Tensor rows;     // int64 [n]: their positions, on the hidden states' device
  at::Tensor targets;  // int64 [n]: their ids, on the hidden states' device
  at::Tensor count;    // int64 scalar on the targets' device
  bool all = false;    // no target is ignored: no selection needed
};

KeptTokens kept_tokens(const at::Tensor& flat_targets, int64_t vocab, const at::Device& device) {
  const at::Tensor predicted = flat_targets.ne(kIgnoreIndex);
  KeptTokens out;
  out.count = predicted.sum();
  const at::Tensor rows = predicted.nonzero().squeeze(1);
  out.all = rows.numel() == flat_targets.numel();
  const at::Tensor ids = out.all ? flat_targets : flat_targets.index_select(0, rows);
  if (ids.is_cpu() && ids.numel() > 0) {  // a device's ids are checked by gather
    const int64_t lowest = ids.min().item<int64_t>(), highest = ids.max().item<int64_t>();
    HPCTRAIN_CHECK(lowest >= 0 && highest < vocab, "the loss: target id {} is outside the vocabulary [0, {}) "
                   "(targets are token ids or {} for a position not predicted)", lowest < 0 ? lowest : highest, vocab,
                   kIgnoreIndex);
  }
  out.rows = rows.to(device, /*non_blocking=*/rows.is_pinned());
  out.targets = ids.to(device);
  return out;
}

// The head's product over the kept rows of hidden [N, D] (the LoRA factors computed on all N rows, so that the
// adapter's dropout mask is the one forward() draws for the same positions).
detail::HeadProduct kept_product(const at::Tensor& flat_hidden, const LmHead& head, const KeptTokens& kept) {
  const auto select = [&](const at::Tensor& rows) { return kept.all ? rows : rows.index_select(0, kept.rows); };
  detail::HeadProduct product;
  product.hidden = select(flat_hidden);
  product.weight = head.weight;
  if (head.quantized) product.quantized = &*head.quantized;
  if (head.adapter != nullptr) {
    const LoraTarget::LowRank lora = head.adapter->lora_factors(flat_hidden, head.training);
    product.lora_input = select(lora.input);
    product.lora_weight = lora.weight;
  }
  return product;
}

struct FlatInputs {
  at::Tensor hidden;   // [N, D]
  at::Tensor targets;  // [N]
};

FlatInputs flatten(const at::Tensor& hidden, const LmHead& head, const at::Tensor& targets) {
  HPCTRAIN_CHECK(head.quantized ? head.quantized->shape.size() == 2 : head.weight.defined() && head.weight.dim() == 2,
                 "the loss: the head's weight must be [vocabulary, width], got {}",
                 head.quantized                ? c10::str(head.quantized->shape)
                 : head.weight.defined() ? c10::str(head.weight.sizes())
                                         : std::string("none"));
  HPCTRAIN_CHECK(hidden.dim() >= 1 && hidden.size(-1) == head.width(), "the loss: hidden states {} do not fit the "
                 "head's weight [{}, {}] (expected [..., {}])", c10::str(hidden.sizes()), head.vocab_size(),
                 head.width(), head.width());
  HPCTRAIN_CHECK(targets.scalar_type() == at::kLong && targets.sizes() == hidden.sizes().slice(0, hidden.dim() - 1),
                 "the loss: targets must be int64 {} (the hidden states' leading shape), got {} {}",
                 c10::str(hidden.sizes().slice(0, hidden.dim() - 1)), std::string(c10::toString(targets.scalar_type())),
                 c10::str(targets.sizes()));
  return {hidden.reshape({-1, hidden.size(-1)}), targets.reshape({-1})};
}

}  // namespace

void check_loss_chunk_tokens(int64_t chunk_tokens) {
  HPCTRAIN_CHECK(chunk_tokens >= 0, "--loss-chunk-tokens {}: expected tokens per chunk >= 1, or 0 for the unchunked "
                 "loss", chunk_tokens);
}

TokenLossSum linear_cross_entropy(const at::Tensor& hidden, const LmHead& head, const at::Tensor& targets,
                                  int64_t chunk_tokens) {
  check_loss_chunk_tokens(chunk_tokens);
  const FlatInputs flat = flatten(hidden, head, targets);
  const KeptTokens kept = kept_tokens(flat.targets, head.vocab_size(), hidden.device());
  const detail::HeadProduct product = kept_product(flat.hidden, head, kept);
  TokenLossSum out;
  out.count = kept.count;
  if (chunk_tokens > 0) {
    out.sum = detail::chunked_cross_entropy_sum(product, kept.targets, chunk_tokens);
    return out;
  }
  // Unchunked: the kept tokens' logits at once, through autograd (the reference of Note [Chunked loss]).
  at::Tensor logits = head_linear(product.hidden, product.weight, product.quantized);
  if (product.lora_input.defined()) logits = logits + at::linear(product.lora_input, product.lora_weight);
  out.sum = cross_entropy(logits, kept.targets, at::Reduction::Sum);
  return out;
}

at::Tensor linear_cross_entropy_per_target(const at::Tensor& hidden, const LmHead& head, const at::Tensor& targets,
                                           int64_t chunk_tokens) {
  check_loss_chunk_tokens(chunk_tokens);
  at::NoGradGuard no_grad;
  const FlatInputs flat = flatten(hidden, head, targets);
  const KeptTokens kept = kept_tokens(flat.targets, head.vocab_size(), hidden.device());
  const detail::HeadProduct product = kept_product(flat.hidden, head, kept);
  const int64_t chunk = chunk_tokens > 0 ? chunk_tokens : std::max<int64_t>(1, product.hidden.size(0));
  const at::Tensor losses = detail::chunked_cross_entropy_per_target(product, kept.targets, chunk);
  at::Tensor out = at::zeros({flat.targets.numel()}, losses.options());
  out.index_copy_(0, kept.rows, losses);
  return out.view(targets.sizes());
}

at::Tensor cross_entropy(const at::Tensor& logits, const at::Tensor& targets, at::Reduction::Reduction reduction) {
  HPCTRAIN_CHECK(logits.dim() == 2 && targets.dim() == 1 && targets.size(0) == logits.size(0),
                 "cross-entropy: logits must be [N, classes] and targets [N], got {} and {}", c10::str(logits.sizes()),
                 c10::str(targets.sizes()));
  const bool half = logits.scalar_type() == at::kBFloat16 || logits.scalar_type() == at::kHalf;
  return at::cross_entropy_loss(half ? logits.to(at::kFloat) : logits, targets, {}, reduction, kIgnoreIndex);
}

}  // namespace hpctrain::models
