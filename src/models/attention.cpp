// Multi-head self-attention that holds at most one score matrix per head at a time (attention.hpp).
#include "models/attention.hpp"
#include "models/dropout.hpp"

#include "hpctrain/compat/torch.hpp"
#include "hpctrain/core/error.hpp"
#include "hpctrain/core/random.hpp"

#include <ATen/ATen.h>
#include <torch/autograd.h>

#include <cmath>
#include <limits>

namespace hpctrain::models::detail {

// Note [Attention memory]
// Autograd over `softmax(q k^T) v` keeps, per layer, the probabilities, the dropout mask and the
// dropped probabilities: three [B, H, L, L] tensors, quadratic in the sequence length. Here the score
// matrices exist only inside `BlockedAttention`, one batch item (all its heads, one [L, L] matrix per
// head) at a time, in a few reusable [H, L, L] workspaces: forward keeps q, k, v, the context and the
// bias for backward; backward recomputes each item's probabilities and dropout mask before using them,
// as FlashAttention does. The dropout mask is counter-based (Note [Counter-based dropout]), seeded per
// call and item, so recomputing it is exact and cheap. Gradient checkpointing of whole layers (a later
// issue) composes with it: rerunning a layer's forward draws the same seed from the same restored
// generator state.

// Note [Causal attention]
// The causal variant is the same BlockedAttention with a flag: after the scores (and the padding bias) are
// formed, the keys after each query are set (not added: no -inf, so a row whose keys are all masked, a left-
// padded query, becomes uniform instead of NaN, as transformers' finfo.min masks) to the dtype's lowest value.
// The [Lq, Lk] boolean "future" mask is built per call in forward and again in backward; nothing Lq x Lk is
// saved for backward. Keys are aligned bottom-right (query i is at key position i + Lk - Lq) so a KV cache can
// pass only the new queries (Note [KV cache] in include/hpctrain/models/kv_cache.hpp). Grouped-query heads are expanded to one key/value head per query head before the
// kernel (linear in L; autograd sums the gradients of a group back into its key/value head).

namespace {

// torch.finfo(dtype).min for the floating dtypes activations can have.
double lowest_value(at::ScalarType dtype) {
  switch (dtype) {
    case at::kFloat: return std::numeric_limits<float>::lowest();
    case at::kDouble: return std::numeric_limits<double>::lowest();
    case at::kHalf: return -65504.0;
    case at::kBFloat16: return -3.3895313892515355e38;
    default: fail("attention: activations must be floating point, got {}", std::string(c10::toString(dtype)));
  }
}

uint64_t item_seed(uint64_t seed, int64_t item) { return derive_seed(seed, static_cast<uint64_t>(item)); }

bool is_half_precision(const at::Tensor& t) { return t.scalar_type() == at::kBFloat16 || t.scalar_type() == at::kHalf; }
// bf16/fp16 as float32; float32 and float64 as they are (the same tensor).
at::Tensor widened(const at::Tensor& t) { return is_half_precision(t) ? t.to(at::kFloat) : t; }

// probs <- softmax(scale * q k^T + bias) for one item: q, k [H, L, d], bias [1, 1, L] (zeros without a
// mask), scores and probs [H, L, L] workspaces. A row whose keys are all padding becomes uniform, as in
// transformers. With bf16/fp16 activations (autocast) the products run in that dtype and the softmax in
// float32 (as autocast's fp32 softmax); returns the float32 probabilities then, else `probs`.
// `future` [Lq, Lk] bool (true = a key after the query) or undefined: those scores become the lowest value.
at::Tensor item_probabilities(at::Tensor& probs, at::Tensor& scores, const at::Tensor& q, const at::Tensor& k,
                              const at::Tensor& bias, double scale, const at::Tensor& future) {
  at::baddbmm_out(scores, bias.expand_as(scores), q, k.transpose(1, 2), /*beta=*/1, /*alpha=*/scale);
  if (future.defined()) scores.masked_fill_(future, lowest_value(scores.scalar_type()));
  if (!is_half_precision(scores)) {
    at::_softmax_out(probs, scores, -1, /*half_to_float=*/false);
    return probs;
  }
  at::Tensor probs_fp32 = at::_softmax(scores.to(at::kFloat), -1, /*half_to_float=*/false);
  probs.copy_(probs_fp32);
  return probs_fp32;
}

// One item's [H, Lq, Lk] scores.
at::Tensor workspace(const at::Tensor& q, const at::Tensor& k) {
  return at::empty({q.size(1), q.size(2), k.size(2)}, q.options());
}

// [Lq, Lk]: true where key j comes after query i (j > i + Lk - Lq); undefined when not causal.
at::Tensor future_keys(const at::Tensor& q, const at::Tensor& k, bool causal) {
  if (!causal) return at::Tensor();
  const int64_t lq = q.size(2), lk = k.size(2);
  return at::ones({lq, lk}, q.options().dtype(at::kBool)).triu_(lk - lq + 1);
}

// q [B, H, Lq, d], k, v [B, H, Lk, d] contiguous, bias [B, 1, 1, Lk] -> context [B, H, Lq, d]; `causal` masks
// the keys after each query (Note [Causal attention]).
class BlockedAttention : public torch::autograd::Function<BlockedAttention> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& q, const at::Tensor& k,
                            const at::Tensor& v, const at::Tensor& bias, double scale, double dropout, bool causal) {
    const uint64_t seed = dropout > 0 ? draw_dropout_seed() : 0;
    at::Tensor context = at::empty_like(q);
    at::Tensor scores = workspace(q, k), probs = workspace(q, k);
    const at::Tensor future = future_keys(q, k, causal);
    for (int64_t b = 0; b < q.size(0); ++b) {
      item_probabilities(probs, scores, q[b], k[b], bias[b], scale, future);
      if (dropout > 0) apply_dropout_mask(probs, dropout, item_seed(seed, b));
      at::Tensor out = context[b];
      at::bmm_out(out, probs, v[b]);
    }
    ctx->save_for_backward({q, k, v, bias, context});
    ctx->saved_data["scale"] = scale;
    ctx->saved_data["dropout"] = dropout;
    ctx->saved_data["seed"] = static_cast<int64_t>(seed);  // IValue holds int64; the bits round-trip
    ctx->saved_data["causal"] = causal;
    return context;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &q = saved[0], &k = saved[1], &v = saved[2], &bias = saved[3], &context = saved[4];
    const double scale = ctx->saved_data["scale"].toDouble();
    const double dropout = ctx->saved_data["dropout"].toDouble();
    const auto seed = static_cast<uint64_t>(ctx->saved_data["seed"].toInt());
    const at::Tensor future = future_keys(q, k, ctx->saved_data["causal"].toBool());
    const at::Tensor grad_context = grad_outputs[0].contiguous();

    // rowsum(dP * P) = rowsum(dO * O), with or without dropout: no [H, L, L] temporary for it.
    // In float32 (the softmax's backward, as its forward, runs in fp32 for bf16/fp16 activations).
    const at::Tensor row_dot = (widened(grad_context) * widened(context)).sum(-1, /*keepdim=*/true);
    at::Tensor grad_q = at::empty_like(q), grad_k = at::empty_like(k), grad_v = at::empty_like(v);
    at::Tensor grad = workspace(q, k), probs = workspace(q, k);
    at::Tensor dropped = dropout > 0 ? workspace(q, k) : at::Tensor();
    for (int64_t b = 0; b < q.size(0); ++b) {
      const at::Tensor dout = grad_context[b];
      // `grad` serves as the scores' scratch here.
      const at::Tensor probs_fp32 = item_probabilities(probs, grad, q[b], k[b], bias[b], scale, future);
      at::bmm_out(grad, dout, v[b].transpose(1, 2));                 // d(dropped P)
      at::Tensor dv = grad_v[b];
      if (dropout > 0) {
        dropped.copy_(probs);
        apply_dropout_mask(dropped, dropout, item_seed(seed, b));
        at::bmm_out(dv, dropped.transpose(1, 2), dout);
        apply_dropout_mask(grad, dropout, item_seed(seed, b));  // dP
      } else {
        at::bmm_out(dv, probs.transpose(1, 2), dout);
      }
      at::Tensor grad_fp32 = widened(grad);  // `grad` itself for float32
      grad_fp32.sub_(row_dot[b]).mul_(probs_fp32);  // dS = P * (dP - rowsum(dP * P))
      if (is_half_precision(grad)) grad.copy_(grad_fp32);
      at::Tensor dq = grad_q[b], dk = grad_k[b];
      at::bmm_out(dq, grad, k[b]);
      at::bmm_out(dk, grad.transpose(1, 2), q[b]);
    }
    grad_q.mul_(scale);
    grad_k.mul_(scale);
    return {grad_q, grad_k, grad_v, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

// transformers' (1 - mask) * finfo(dtype).min as [B, 1, 1, L] in q's dtype (autocast-safe); zeros without a mask.
at::Tensor padding_bias(const at::Tensor& q, const at::Tensor& key_mask, int64_t batch, int64_t length) {
  const double lowest = lowest_value(q.scalar_type());  // the same dtype check with or without a mask
  if (!key_mask.defined()) return at::zeros({batch, 1, 1, length}, q.options());
  HPCTRAIN_CHECK(key_mask.dim() == 2 && key_mask.size(0) == batch && key_mask.size(1) == length,
                 "attention_mask: expected shape [{}, {}] (batch, sequence), got {}", batch, length,
                 c10::str(key_mask.sizes()));
  return key_mask.to(q.scalar_type()).neg().add_(1).mul_(lowest).view({batch, 1, 1, length});
}

// [B, L, heads * d] -> [B, heads, L, d] contiguous.
at::Tensor split_heads(const at::Tensor& x, int64_t heads) {
  const int64_t batch = x.size(0), length = x.size(1);
  return x.view({batch, length, heads, x.size(2) / heads}).transpose(1, 2).contiguous();
}

// [B, kv_heads, L, d] -> [B, kv_heads * group, L, d]: transformers' repeat_kv.
at::Tensor repeat_kv(const at::Tensor& x, int64_t group) {
  if (group == 1) return x;
  const int64_t batch = x.size(0), kv_heads = x.size(1), length = x.size(2), head_dim = x.size(3);
  return x.unsqueeze(2)
      .expand({batch, kv_heads, group, length, head_dim})
      .reshape({batch, kv_heads * group, length, head_dim});
}

#if HPCTRAIN_TORCH_2
// SDPA on CUDA: is_causal and no mask without padding (flash-eligible); with padding one float mask [B, 1, Lq, Lk]
// of lowest values (finite, so left-padded rows stay finite). SDPA's own scale is 1/sqrt(d): q is rescaled for
// any other `scale` (LibTorch 2.0 has no scale argument).
at::Tensor causal_sdpa(at::Tensor q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& key_mask,
                       const at::Tensor& bias, double scale, double p) {
  const double default_scale = 1.0 / std::sqrt(static_cast<double>(q.size(3)));
  if (std::abs(scale - default_scale) > 1e-12 * default_scale) q = q * (scale / default_scale);
  const int64_t lq = q.size(2), lk = k.size(2);
  if (!key_mask.defined() && lq == lk) return at::scaled_dot_product_attention(q, k, v, {}, p, /*is_causal=*/true);
  const at::Tensor future = future_keys(q, k, true);
  const at::Tensor mask = bias.expand({q.size(0), 1, lq, lk}).masked_fill(future, lowest_value(q.scalar_type()));
  return at::scaled_dot_product_attention(q, k, v, mask, p, /*is_causal=*/false);
}
#endif

}  // namespace

at::Tensor self_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& key_mask,
                          int64_t heads, double dropout, bool training) {
  const int64_t batch = q.size(0);
  const int64_t length = q.size(1);
  const int64_t head_dim = q.size(2) / heads;
  const at::Tensor bias = padding_bias(q, key_mask, batch, length);
  const double scale = 1.0 / std::sqrt(static_cast<double>(head_dim));
  const double p = training ? dropout : 0.0;
  at::Tensor context;
#if HPCTRAIN_TORCH_2
  if (q.is_cuda()) {  // fused kernels (flash / memory-efficient) keep the same property on GPUs
    // Without padding no mask at all: the flash kernel takes no float bias (Note [No mask without padding]).
    const at::Tensor mask = key_mask.defined() ? bias : at::Tensor();
    context =
        at::scaled_dot_product_attention(split_heads(q, heads), split_heads(k, heads), split_heads(v, heads), mask, p);
  }
#endif
  if (!context.defined()) {
    context = BlockedAttention::apply(split_heads(q, heads), split_heads(k, heads), split_heads(v, heads), bias, scale,
                                      p, /*causal=*/false);
  }
  return context.transpose(1, 2).reshape({batch, length, heads * head_dim});
}

at::Tensor causal_self_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                 const at::Tensor& key_mask, int64_t heads, int64_t kv_heads, double scale,
                                 double dropout, bool training) {
  const int64_t batch = q.size(0), query_length = q.size(1), key_length = k.size(1);
  const int64_t head_dim = q.size(2) / heads;
  HPCTRAIN_CHECK(
      heads % kv_heads == 0 && k.size(2) == kv_heads * head_dim && v.sizes() == k.sizes() && key_length >= query_length,
      "causal attention: expected q [B, Lq, {} * {}] and k, v [B, Lk >= Lq, {} * {}], got q {}, k {}, v {}", heads,
      head_dim, kv_heads, head_dim, c10::str(q.sizes()), c10::str(k.sizes()), c10::str(v.sizes()));
  const at::Tensor bias = padding_bias(q, key_mask, batch, key_length);
  const double p = training ? dropout : 0.0;
  const at::Tensor qh = split_heads(q, heads);
  const at::Tensor kh = repeat_kv(split_heads(k, kv_heads), heads / kv_heads);
  const at::Tensor vh = repeat_kv(split_heads(v, kv_heads), heads / kv_heads);
  at::Tensor context;
#if HPCTRAIN_TORCH_2
  if (q.is_cuda()) context = causal_sdpa(qh, kh, vh, key_mask, bias, scale, p);
#endif
  if (!context.defined()) context = BlockedAttention::apply(qh, kh, vh, bias, scale, p, /*causal=*/true);
  return context.transpose(1, 2).reshape({batch, query_length, heads * head_dim});
}

}  // namespace hpctrain::models::detail
