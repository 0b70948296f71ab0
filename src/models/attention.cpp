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
at::Tensor item_probabilities(at::Tensor& probs, at::Tensor& scores, const at::Tensor& q, const at::Tensor& k,
                              const at::Tensor& bias, double scale) {
  at::baddbmm_out(scores, bias.expand_as(scores), q, k.transpose(1, 2), /*beta=*/1, /*alpha=*/scale);
  if (!is_half_precision(scores)) {
    at::_softmax_out(probs, scores, -1, /*half_to_float=*/false);
    return probs;
  }
  at::Tensor probs_fp32 = at::_softmax(scores.to(at::kFloat), -1, /*half_to_float=*/false);
  probs.copy_(probs_fp32);
  return probs_fp32;
}

at::Tensor workspace(const at::Tensor& q) { return at::empty({q.size(1), q.size(2), q.size(2)}, q.options()); }

// q, k, v [B, H, L, d] contiguous, bias [B, 1, 1, L] -> context [B, H, L, d].
class BlockedAttention : public torch::autograd::Function<BlockedAttention> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& q, const at::Tensor& k,
                            const at::Tensor& v, const at::Tensor& bias, double scale, double dropout) {
    const uint64_t seed = dropout > 0 ? draw_dropout_seed() : 0;
    at::Tensor context = at::empty_like(q);
    at::Tensor scores = workspace(q), probs = workspace(q);
    for (int64_t b = 0; b < q.size(0); ++b) {
      item_probabilities(probs, scores, q[b], k[b], bias[b], scale);
      if (dropout > 0) apply_dropout_mask(probs, dropout, item_seed(seed, b));
      at::Tensor out = context[b];
      at::bmm_out(out, probs, v[b]);
    }
    ctx->save_for_backward({q, k, v, bias, context});
    ctx->saved_data["scale"] = scale;
    ctx->saved_data["dropout"] = dropout;
    ctx->saved_data["seed"] = static_cast<int64_t>(seed);  // IValue holds int64; the bits round-trip
    return context;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &q = saved[0], &k = saved[1], &v = saved[2], &bias = saved[3], &context = saved[4];
    const double scale = ctx->saved_data["scale"].toDouble();
    const double dropout = ctx->saved_data["dropout"].toDouble();
    const auto seed = static_cast<uint64_t>(ctx->saved_data["seed"].toInt());
    const at::Tensor grad_context = grad_outputs[0].contiguous();

    // rowsum(dP * P) = rowsum(dO * O), with or without dropout: no [H, L, L] temporary for it.
    // In float32 (the softmax's backward, as its forward, runs in fp32 for bf16/fp16 activations).
    const at::Tensor row_dot = (widened(grad_context) * widened(context)).sum(-1, /*keepdim=*/true);
    at::Tensor grad_q = at::empty_like(q), grad_k = at::empty_like(k), grad_v = at::empty_like(v);
    at::Tensor grad = workspace(q), probs = workspace(q);
    at::Tensor dropped = dropout > 0 ? workspace(q) : at::Tensor();
    for (int64_t b = 0; b < q.size(0); ++b) {
      const at::Tensor dout = grad_context[b];
      const at::Tensor probs_fp32 = item_probabilities(probs, grad, q[b], k[b], bias[b], scale);  // `grad`: scratch
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
    return {grad_q, grad_k, grad_v, at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor self_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& key_mask,
                          int64_t heads, double dropout, bool training) {
  const int64_t batch = q.size(0);
  const int64_t length = q.size(1);
  const int64_t head_dim = q.size(2) / heads;
  auto split_heads = [&](const at::Tensor& x) {
    return x.view({batch, length, heads, head_dim}).transpose(1, 2).contiguous();
  };
  at::Tensor bias;
  if (key_mask.defined()) {
    HPCTRAIN_CHECK(key_mask.dim() == 2 && key_mask.size(0) == batch && key_mask.size(1) == length,
                   "attention_mask: expected shape [{}, {}] (batch, sequence), got {}", batch, length,
                   c10::str(key_mask.sizes()));
    // transformers' (1 - mask) * finfo(dtype).min, in the activations' dtype (autocast-safe).
    bias = key_mask.to(q.scalar_type()).neg().add_(1).mul_(lowest_value(q.scalar_type()));
    bias = bias.view({batch, 1, 1, length});
  } else {
    (void)lowest_value(q.scalar_type());  // the same dtype check with or without a mask
    bias = at::zeros({batch, 1, 1, length}, q.options());
  }
  const double scale = 1.0 / std::sqrt(static_cast<double>(head_dim));
  const double p = training ? dropout : 0.0;
  at::Tensor context;
#if HPCTRAIN_TORCH_2
  if (q.is_cuda()) {  // fused kernels (flash / memory-efficient) keep the same property on GPUs
    context = at::scaled_dot_product_attention(split_heads(q), split_heads(k), split_heads(v), bias, p);
  }
#endif
  if (!context.defined()) {
    context = BlockedAttention::apply(split_heads(q), split_heads(k), split_heads(v), bias, scale, p);
  }
  return context.transpose(1, 2).reshape({batch, length, heads * head_dim});
}

}  // namespace hpctrain::models::detail
