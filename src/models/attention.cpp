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

// Note [Packed attention]
// A row packed from several documents (Note [Document boundaries] in src/data/examples.cpp) comes with document
// ids [B, L] (equal within a document, which is one run of tokens; the right padding continues the last document,
// where the causal order and the padding bias already keep it from every real query). Attention is causal and
// block-diagonal: no query sees a key of another document. On the CPU BlockedAttention then runs one block per
// document instead of one per batch item: the document's queries against its own keys, an [H, n, n] corner of the
// same workspaces with the [n, n] corner of the causal mask, so the work is sum(n^2), not L^2, and a document's
// numbers are those it has alone (up to the summation order of the products). Nothing [L, L] per row exists. On
// CUDA (LibTorch 2) SDPA gets one float mask [B, 1, L, L], lowest value on "future or other document" keys
// (causal_attention_bias), which the memory-efficient kernel takes; the stable C++ API has no variable-length
// (cu_seqlens) flash entry, so the flash kernel is not used for packed rows.

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

// One block of BlockedAttention: item b's queries [q_first, q_first + q_count) against its keys [k_first, k_first +
// k_count): one block per item (all its queries and keys), or one per document of a packed row (Note [Packed
// attention]). `stream` numbers the block's dropout mask.
struct Block {
  int64_t item = 0, q_first = 0, q_count = 0, k_first = 0, k_count = 0;
  uint64_t stream = 0;
};

// documents empty: one block per item, its dropout stream the item's (as before packing existed). Else int64
// [B, L] with Lq == Lk == L: one block per run of equal ids, numbered in order.
std::vector<Block> blocks_of(const at::Tensor& q, const at::Tensor& k, const at::Tensor& documents) {
  const int64_t batch = q.size(0), lq = q.size(2), lk = k.size(2);
  std::vector<Block> blocks;
  if (documents.numel() == 0) {
    for (int64_t b = 0; b < batch; ++b) blocks.push_back({b, 0, lq, 0, lk, static_cast<uint64_t>(b)});
    return blocks;
  }
  const at::Tensor ids = documents.to(at::kCPU, at::kLong).contiguous();  // [B, L]
  const int64_t* id = ids.data_ptr<int64_t>();
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t first = 0, t = 1; t <= lk; ++t) {
      if (t < lk && id[b * lk + t] == id[b * lk + first]) continue;
      blocks.push_back({b, first, t - first, first, t - first, blocks.size()});
      first = t;
    }
  }
  return blocks;
}

// The first [H, rows, columns] elements of a [H, Lq, Lk] workspace, contiguous.
at::Tensor corner(const at::Tensor& space, int64_t rows, int64_t columns) {
  return space.view(-1).narrow(0, 0, space.size(0) * rows * columns).view({space.size(0), rows, columns});
}

// A block's slices of q, k, v [B, H, L, d], bias [B, 1, 1, Lk] and the causal mask [Lq, Lk] (or undefined).
struct BlockViews {
  at::Tensor q, k, v, bias, future;
  BlockViews(const Block& block, const at::Tensor& q_all, const at::Tensor& k_all, const at::Tensor& v_all,
             const at::Tensor& bias_all, const at::Tensor& future_all)
      : q(q_all[block.item].narrow(1, block.q_first, block.q_count)),
        k(k_all[block.item].narrow(1, block.k_first, block.k_count)),
        v(v_all[block.item].narrow(1, block.k_first, block.k_count)),
        bias(bias_all[block.item].narrow(-1, block.k_first, block.k_count)) {
    if (future_all.defined())
      future = future_all.narrow(0, block.q_first, block.q_count).narrow(1, block.k_first, block.k_count);
  }
};

// out <- a @ b; `out` may be a strided slice (a document's rows of an item).
void bmm_into(at::Tensor out, const at::Tensor& a, const at::Tensor& b) {
  if (out.is_contiguous()) {
    at::bmm_out(out, a, b);
  } else {
    out.copy_(at::bmm(a, b));
  }
}

// q [B, H, Lq, d], k, v [B, H, Lk, d] contiguous, bias [B, 1, 1, Lk] -> context [B, H, Lq, d]; `causal` masks
// the keys after each query (Note [Causal attention]); `documents` [B, L] keeps every query to the keys of its own
// document (Note [Packed attention]), or is empty (LibTorch 1.13's Function takes no undefined tensor).
class BlockedAttention : public torch::autograd::Function<BlockedAttention> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& q, const at::Tensor& k,
                            const at::Tensor& v, const at::Tensor& bias, const at::Tensor& documents, double scale,
                            double dropout, bool causal) {
    const uint64_t seed = dropout > 0 ? draw_dropout_seed() : 0;
    at::Tensor context = at::empty_like(q);  // the blocks cover every query
    at::Tensor scores = workspace(q, k), probs = workspace(q, k);
    const at::Tensor future = future_keys(q, k, causal);
    for (const Block& block : blocks_of(q, k, documents)) {
      const BlockViews in(block, q, k, v, bias, future);
      at::Tensor block_probs = corner(probs, block.q_count, block.k_count);
      at::Tensor block_scores = corner(scores, block.q_count, block.k_count);
      item_probabilities(block_probs, block_scores, in.q, in.k, in.bias, scale, in.future);
      if (dropout > 0) apply_dropout_mask(block_probs, dropout, item_seed(seed, static_cast<int64_t>(block.stream)));
      bmm_into(context[block.item].narrow(1, block.q_first, block.q_count), block_probs, in.v);
    }
    ctx->save_for_backward({q, k, v, bias, context, documents});
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
    const at::Tensor& documents = saved[5];
    const double scale = ctx->saved_data["scale"].toDouble();
    const double dropout = ctx->saved_data["dropout"].toDouble();
    const auto seed = static_cast<uint64_t>(ctx->saved_data["seed"].toInt());
    const at::Tensor future = future_keys(q, k, ctx->saved_data["causal"].toBool());
    const at::Tensor grad_context = grad_outputs[0].contiguous();

    // rowsum(dP * P) = rowsum(dO * O), with or without dropout: no [H, L, L] temporary for it.
    // In float32 (the softmax's backward, as its forward, runs in fp32 for bf16/fp16 activations).
    const at::Tensor row_dot = (widened(grad_context) * widened(context)).sum(-1, /*keepdim=*/true);
    // The blocks cover every query and every key once: each row of the gradients is written once.
    at::Tensor grad_q = at::empty_like(q), grad_k = at::empty_like(k), grad_v = at::empty_like(v);
    at::Tensor grad_space = workspace(q, k), probs_space = workspace(q, k);
    at::Tensor dropped_space = dropout > 0 ? workspace(q, k) : at::Tensor();
    for (const Block& block : blocks_of(q, k, documents)) {
      const BlockViews in(block, q, k, v, bias, future);
      const int64_t item = block.item;
      const at::Tensor dout = grad_context[item].narrow(1, block.q_first, block.q_count);
      at::Tensor grad = corner(grad_space, block.q_count, block.k_count);
      at::Tensor probs = corner(probs_space, block.q_count, block.k_count);
      // `grad` serves as the scores' scratch here.
      const at::Tensor probs_fp32 = item_probabilities(probs, grad, in.q, in.k, in.bias, scale, in.future);
      at::bmm_out(grad, dout, in.v.transpose(1, 2));  // d(dropped P)
      const at::Tensor dv = grad_v[item].narrow(1, block.k_first, block.k_count);
      const auto stream = static_cast<int64_t>(block.stream);
      if (dropout > 0) {
        at::Tensor dropped = corner(dropped_space, block.q_count, block.k_count);
        dropped.copy_(probs);
        apply_dropout_mask(dropped, dropout, item_seed(seed, stream));
        bmm_into(dv, dropped.transpose(1, 2), dout);
        apply_dropout_mask(grad, dropout, item_seed(seed, stream));  // dP
      } else {
        bmm_into(dv, probs.transpose(1, 2), dout);
      }
      at::Tensor grad_fp32 = widened(grad);  // `grad` itself for float32
      grad_fp32.sub_(row_dot[item].narrow(1, block.q_first, block.q_count)).mul_(probs_fp32);  // dS = P * (dP - rowsum(dP * P))
      if (is_half_precision(grad)) grad.copy_(grad_fp32);
      bmm_into(grad_q[item].narrow(1, block.q_first, block.q_count), grad, in.k);
      bmm_into(grad_k[item].narrow(1, block.k_first, block.k_count), grad.transpose(1, 2), in.q);
    }
    grad_q.mul_(scale);
    grad_k.mul_(scale);
    return {grad_q, grad_k, grad_v, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
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

}  // namespace

at::Tensor causal_attention_bias(const at::Tensor& bias, const at::Tensor& documents, int64_t query_length) {
  const int64_t batch = bias.size(0), lk = bias.size(-1), lq = query_length;
  at::Tensor hidden_keys = at::ones({lq, lk}, bias.options().dtype(at::kBool)).triu_(lk - lq + 1).unsqueeze(0);
  if (documents.defined()) {
    const at::Tensor ids = documents.to(bias.device());
    hidden_keys = hidden_keys.logical_or(ids.narrow(1, lk - lq, lq).unsqueeze(2).ne(ids.unsqueeze(1)));  // [B, Lq, Lk]
  }
  return bias.expand({batch, 1, lq, lk}).masked_fill(hidden_keys.unsqueeze(1), lowest_value(bias.scalar_type()));
}

#if HPCTRAIN_TORCH_2
at::Tensor causal_sdpa(at::Tensor q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& key_mask,
                       const at::Tensor& bias, const at::Tensor& documents, double scale, double p) {
  const double default_scale = 1.0 / std::sqrt(static_cast<double>(q.size(3)));
  if (std::abs(scale - default_scale) > 1e-12 * default_scale) q = q * (scale / default_scale);
  const int64_t lq = q.size(2), lk = k.size(2);
  if (!key_mask.defined() && !documents.defined() && lq == lk)
    return at::scaled_dot_product_attention(q, k, v, {}, p, /*is_causal=*/true);
  return at::scaled_dot_product_attention(q, k, v, causal_attention_bias(bias, documents, lq), p, /*is_causal=*/false);
}
#endif

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
    context = BlockedAttention::apply(split_heads(q, heads), split_heads(k, heads), split_heads(v, heads), bias,
                                      at::empty({0}, q.options().dtype(at::kLong)), scale, p, /*causal=*/false);
  }
  return context.transpose(1, 2).reshape({batch, length, heads * head_dim});
}

at::Tensor causal_self_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                 const at::Tensor& key_mask, int64_t heads, int64_t kv_heads, double scale,
                                 double dropout, bool training, const at::Tensor& documents) {
  const int64_t batch = q.size(0), query_length = q.size(1), key_length = k.size(1);
  const int64_t head_dim = q.size(2) / heads;
  HPCTRAIN_CHECK(
      heads % kv_heads == 0 && k.size(2) == kv_heads * head_dim && v.sizes() == k.sizes() && key_length >= query_length,
      "causal attention: expected q [B, Lq, {} * {}] and k, v [B, Lk >= Lq, {} * {}], got q {}, k {}, v {}", heads,
      head_dim, kv_heads, head_dim, c10::str(q.sizes()), c10::str(k.sizes()), c10::str(v.sizes()));
  HPCTRAIN_CHECK(!documents.defined() || (documents.dim() == 2 && documents.size(0) == batch &&
                                           documents.size(1) == key_length && key_length == query_length),
                 "causal attention: document ids must be [B, L] = [{}, {}] with no KV cache, got {} for {} queries",
                 batch, key_length, documents.defined() ? c10::str(documents.sizes()) : "", query_length);
  const at::Tensor bias = padding_bias(q, key_mask, batch, key_length);
  const double p = training ? dropout : 0.0;
  const at::Tensor qh = split_heads(q, heads);
  const at::Tensor kh = repeat_kv(split_heads(k, kv_heads), heads / kv_heads);
  const at::Tensor vh = repeat_kv(split_heads(v, kv_heads), heads / kv_heads);
  at::Tensor context;
#if HPCTRAIN_TORCH_2
  if (q.is_cuda()) context = causal_sdpa(qh, kh, vh, key_mask, bias, documents, scale, p);
#endif
  if (!context.defined()) {
    // LibTorch 1.13's Function::apply takes no undefined tensor: an empty one stands for "one document per row".
    const at::Tensor ids = documents.defined() ? documents : at::empty({0}, q.options().dtype(at::kLong));
    context = BlockedAttention::apply(qh, kh, vh, bias, ids, scale, p, /*causal=*/true);
  }
  return context.transpose(1, 2).reshape({batch, query_length, heads * head_dim});
}

}  // namespace hpctrain::models::detail
