// Blocked self-attention (src/models/attention.cpp): equal to the textbook formula in value and
// gradient, dropout as at::dropout, and the memory bound of Note [Attention memory].
#include "models/attention.hpp"
#include "counting_allocator.hpp"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <torch/autograd.h>
#include <torch/utils.h>

#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

namespace hpctrain::models::detail {
namespace {

// softmax(q k^T / sqrt(d) + (1 - mask) * lowest) v, materializing [B, H, L, L]; q, k, v [B, L, H*d].
// The additive mask of transformers' BERT: even a row whose keys are all padding passes gradients.
at::Tensor textbook_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                              const at::Tensor& key_mask, int64_t heads) {
  const int64_t batch = q.size(0), length = q.size(1), head_dim = q.size(2) / heads;
  auto split = [&](const at::Tensor& x) { return x.view({batch, length, heads, head_dim}).transpose(1, 2); };
  at::Tensor scores = at::matmul(split(q), split(k).transpose(-1, -2)) / std::sqrt(static_cast<double>(head_dim));
  if (key_mask.defined()) {
    const double lowest = q.scalar_type() == at::kDouble ? std::numeric_limits<double>::lowest()
                                                         : std::numeric_limits<float>::lowest();
    scores = scores + (1 - key_mask.to(q.scalar_type())).mul(lowest).view({batch, 1, 1, length});
  }
  return at::matmul(at::softmax(scores, -1), split(v)).transpose(1, 2).reshape({batch, length, heads * head_dim});
}

struct Inputs {
  at::Tensor q, k, v, mask;
};

// Example 0 has two padded keys; with all_padding_row the last example is padding only.
Inputs random_inputs(int64_t batch, int64_t length, int64_t dim, at::ScalarType dtype, bool all_padding_row) {
  Inputs in;
  in.q = at::randn({batch, length, dim}, dtype).requires_grad_(true);
  in.k = at::randn({batch, length, dim}, dtype).requires_grad_(true);
  in.v = at::randn({batch, length, dim}, dtype).requires_grad_(true);
  in.mask = at::ones({batch, length}, at::kLong);
  in.mask.index_put_({0, at::indexing::Slice(length - 2, at::indexing::None)}, 0);  // padded keys
  if (all_padding_row) in.mask.index_put_({batch - 1, at::indexing::Slice()}, 0);
  return in;
}

double max_abs_diff(const at::Tensor& a, const at::Tensor& b) { return (a - b).abs().max().item<double>(); }

BOOST_AUTO_TEST_SUITE(attention)

BOOST_AUTO_TEST_CASE(value_and_gradients_equal_the_textbook_formula) {
  torch::manual_seed(1);
  const Inputs in = random_inputs(3, 7, 12, at::kDouble, true);
  const at::Tensor weight = at::randn({3, 7, 12}, at::kDouble);  // a loss that weights every output

  const at::Tensor ours = self_attention(in.q, in.k, in.v, in.mask, 3, 0.1, /*training=*/false);
  const auto ours_grads = torch::autograd::grad({(ours * weight).sum()}, {in.q, in.k, in.v});
  const at::Tensor expected = textbook_attention(in.q, in.k, in.v, in.mask, 3);
  const auto expected_grads = torch::autograd::grad({(expected * weight).sum()}, {in.q, in.k, in.v});

  BOOST_TEST(max_abs_diff(ours, expected) < 1e-12);
  for (size_t i = 0; i < 3; ++i) {
    BOOST_TEST_CONTEXT("gradient " << "qkv"[i]) { BOOST_TEST(max_abs_diff(ours_grads[i], expected_grads[i]) < 1e-12); }
  }
  // Without a mask, too.
  const at::Tensor unmasked = self_attention(in.q, in.k, in.v, at::Tensor(), 3, 0.0, true);
  BOOST_TEST(max_abs_diff(unmasked, textbook_attention(in.q, in.k, in.v, at::Tensor(), 3)) < 1e-12);
}

// With v = identity (L == head_dim, one head), the context is the (dropped) probability matrix itself.
BOOST_AUTO_TEST_CASE(dropout_zeroes_probabilities_and_rescales_the_rest) {
  torch::manual_seed(2);
  const int64_t batch = 4, length = 64;
  const at::Tensor q = at::randn({batch, length, length}), k = at::randn({batch, length, length});
  const at::Tensor v = at::eye(length).expand({batch, length, length}).contiguous();
  const double p = 0.25;
  const at::Tensor probs = self_attention(q, k, v, at::Tensor(), 1, p, /*training=*/false);
  const at::Tensor dropped = self_attention(q, k, v, at::Tensor(), 1, p, /*training=*/true);

  const at::Tensor zeroed = dropped == 0;
  const double zero_share = zeroed.to(at::kDouble).mean().item<double>();
  BOOST_TEST(std::abs(zero_share - p) < 0.01);  // 16,384 draws: the standard error is 0.003
  const at::Tensor kept = dropped.masked_select(~zeroed), kept_probs = probs.masked_select(~zeroed);
  BOOST_TEST(max_abs_diff(kept, kept_probs / (1 - p)) < 1e-6);

  // The same seed gives the same noise; the next call gets new noise.
  torch::manual_seed(3);
  const at::Tensor first = self_attention(q, k, v, at::Tensor(), 1, p, true);
  const at::Tensor second = self_attention(q, k, v, at::Tensor(), 1, p, true);
  torch::manual_seed(3);
  BOOST_TEST(at::equal(self_attention(q, k, v, at::Tensor(), 1, p, true), first));
  BOOST_TEST(!at::equal(first, second));
}

// Backward recomputes the dropout noise: its gradient must be that of the function forward computed.
// Checked against central differences, reseeding so each evaluation draws the same noise. (No all-padding
// row: there the lowest-value bias swamps the scores, so the numeric derivative is 0 where autograd's is not.)
BOOST_AUTO_TEST_CASE(gradients_with_dropout_match_finite_differences) {
  torch::manual_seed(4);
  const Inputs in = random_inputs(2, 5, 8, at::kDouble, false);
  const at::Tensor weight = at::randn({2, 5, 8}, at::kDouble);
  const auto loss = [&](const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
    torch::manual_seed(99);
    return (self_attention(q, k, v, in.mask, 2, 0.3, true) * weight).sum();
  };
  const auto grads = torch::autograd::grad({loss(in.q, in.k, in.v)}, {in.q, in.k, in.v});
  at::NoGradGuard no_grad;
  const double eps = 1e-6;
  for (int which = 0; which < 3; ++which) {
    const at::Tensor direction = at::randn({2, 5, 8}, at::kDouble);
    std::array<at::Tensor, 3> plus{in.q, in.k, in.v}, minus{in.q, in.k, in.v};
    plus[which] = plus[which] + eps * direction;
    minus[which] = minus[which] - eps * direction;
    const double numeric = (loss(plus[0], plus[1], plus[2]) - loss(minus[0], minus[1], minus[2])).item<double>() /
                           (2 * eps);
    const double analytic = (grads[which] * direction).sum().item<double>();
    BOOST_TEST_CONTEXT("input " << "qkv"[which] << ": numeric " << numeric << ", analytic " << analytic) {
      BOOST_TEST(std::abs(numeric - analytic) < 1e-6 * std::max(1.0, std::abs(analytic)));
    }
  }
}

// Note [Attention memory]: forward + backward over B items hold about three [H, L, L] workspaces,
// not the three [B, H, L, L] tensors autograd keeps for the textbook formula.
BOOST_AUTO_TEST_CASE(holds_one_score_matrix_per_head_at_a_time) {
  torch::manual_seed(5);
  const int64_t batch = 16, length = 512, heads = 2, dim = 16;
  const Inputs in = random_inputs(batch, length, dim, at::kFloat, false);
  const size_t score_tensor = static_cast<size_t>(batch * heads * length * length) * sizeof(float);  // 32 MiB
  const size_t per_item = score_tensor / batch;                                                    // 2 MiB

  const size_t ours = testing::peak_bytes_during([&] {
    self_attention(in.q, in.k, in.v, in.mask, heads, 0.1, true).sum().backward();
  });
  const size_t textbook = testing::peak_bytes_during([&] {
    at::Tensor scores = textbook_attention(in.q, in.k, in.v, in.mask, heads);
    at::dropout(scores, 0.1, true).sum().backward();
  });
  BOOST_TEST_MESSAGE("peak bytes: blocked " << ours << ", textbook " << textbook << ", one [B,H,L,L] "
                                            << score_tensor);
  // Activations other than scores (q, k, v, context, gradients) are [B, L, H*d]: 512 KiB each here.
  BOOST_TEST(ours < 4 * per_item + 12 * static_cast<size_t>(batch * length * dim) * sizeof(float));
  BOOST_TEST(ours < score_tensor / 2);
  BOOST_TEST(textbook > 2 * score_tensor);  // the measurement sees what it is meant to see
}

BOOST_AUTO_TEST_SUITE_END()

// ---- causal_self_attention (Note [Causal attention]) ----

// The textbook causal attention with grouped-query heads, materializing [B, H, Lq, Lk]: keys after a query
// (bottom-right aligned) filled with the lowest value, padded keys with the additive mask.
at::Tensor textbook_causal(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& key_mask,
                           int64_t heads, int64_t kv_heads) {
  const int64_t batch = q.size(0), lq = q.size(1), lk = k.size(1), head_dim = q.size(2) / heads;
  auto split = [&](const at::Tensor& x, int64_t n) { return x.view({batch, x.size(1), n, head_dim}).transpose(1, 2); };
  const at::Tensor kh = split(k, kv_heads).repeat_interleave(heads / kv_heads, 1);
  const at::Tensor vh = split(v, kv_heads).repeat_interleave(heads / kv_heads, 1);
  at::Tensor scores = at::matmul(split(q, heads), kh.transpose(-1, -2)) / std::sqrt(static_cast<double>(head_dim));
  const double lowest = std::numeric_limits<double>::lowest();
  if (key_mask.defined()) scores = scores + (1 - key_mask.to(q.scalar_type())).mul(lowest).view({batch, 1, 1, lk});
  const at::Tensor future = at::ones({lq, lk}, at::kBool).triu(lk - lq + 1);
  scores = scores.masked_fill(future, lowest);
  return at::matmul(at::softmax(scores, -1), vh).transpose(1, 2).reshape({batch, lq, heads * head_dim});
}

BOOST_AUTO_TEST_SUITE(causal_attention)

BOOST_AUTO_TEST_CASE(value_and_gradients_equal_the_textbook_formula) {
  torch::manual_seed(6);
  const int64_t batch = 3, length = 7, heads = 4, kv_heads = 2, head_dim = 3;
  const at::Tensor q = at::randn({batch, length, heads * head_dim}, at::kDouble).requires_grad_(true);
  const at::Tensor k = at::randn({batch, length, kv_heads * head_dim}, at::kDouble).requires_grad_(true);
  const at::Tensor v = at::randn({batch, length, kv_heads * head_dim}, at::kDouble).requires_grad_(true);
  at::Tensor mask = at::ones({batch, length}, at::kLong);
  mask.index_put_({0, at::indexing::Slice(length - 2, at::indexing::None)}, 0);  // right padding
  const at::Tensor weight = at::randn({batch, length, heads * head_dim}, at::kDouble);
  const double scale = 1.0 / std::sqrt(static_cast<double>(head_dim));
  for (const bool masked : {false, true}) {
    BOOST_TEST_CONTEXT("padding mask " << masked) {
      const at::Tensor key_mask = masked ? mask : at::Tensor();
      const at::Tensor ours = causal_self_attention(q, k, v, key_mask, heads, kv_heads, scale, 0.1, false);
      const at::Tensor expected = textbook_causal(q, k, v, key_mask, heads, kv_heads);
      BOOST_TEST(max_abs_diff(ours, expected) < 1e-12);
      const auto ours_grads = torch::autograd::grad({(ours * weight).sum()}, {q, k, v});
      const auto expected_grads = torch::autograd::grad({(expected * weight).sum()}, {q, k, v});
      for (size_t i = 0; i < 3; ++i) {
        BOOST_TEST_CONTEXT("gradient "
                           << "qkv"[i]) {
          BOOST_TEST(max_abs_diff(ours_grads[i], expected_grads[i]) < 1e-12);
        }
      }
    }
  }
}

// A KV cache's shape: 2 new queries against 6 keys see the keys up to their own position (4 and 5).
BOOST_AUTO_TEST_CASE(fewer_queries_than_keys_are_the_last_positions) {
  torch::manual_seed(7);
  const at::Tensor q = at::randn({2, 6, 8}, at::kDouble), k = at::randn({2, 6, 8}, at::kDouble);
  const at::Tensor v = at::randn({2, 6, 8}, at::kDouble);
  const at::Tensor full = causal_self_attention(q, k, v, at::Tensor(), 2, 2, 0.5, 0.0, false);
  const at::Tensor last = causal_self_attention(q.slice(1, 4), k, v, at::Tensor(), 2, 2, 0.5, 0.0, false);
  BOOST_TEST(max_abs_diff(last, full.slice(1, 4)) < 1e-12);
}

// Changing the keys and values of later positions changes nothing before them, in value or gradient.
BOOST_AUTO_TEST_CASE(outputs_do_not_depend_on_later_tokens) {
  torch::manual_seed(8);
  const at::Tensor q = at::randn({2, 9, 8}, at::kDouble), k = at::randn({2, 9, 4}, at::kDouble);
  const at::Tensor v = at::randn({2, 9, 4}, at::kDouble).requires_grad_(true);
  const at::Tensor out = causal_self_attention(q, k, v, at::Tensor(), 4, 2, 0.5, 0.0, false);
  at::Tensor k2 = k.clone(), v2 = v.detach().clone();
  k2.slice(1, 5).normal_();
  v2.slice(1, 5).normal_();
  const at::Tensor out2 = causal_self_attention(q, k2, v2, at::Tensor(), 4, 2, 0.5, 0.0, false);
  BOOST_TEST(max_abs_diff(out.slice(1, 0, 5), out2.slice(1, 0, 5)) == 0.0);
  BOOST_TEST(max_abs_diff(out.slice(1, 5), out2.slice(1, 5)) > 1e-3);
  const at::Tensor grad_v = torch::autograd::grad({out.slice(1, 0, 5).sum()}, {v})[0];
  BOOST_TEST(grad_v.slice(1, 5).abs().max().item<double>() == 0.0);
}

// Left padding: a query whose keys are all padding or future gets a finite (uniform) row, not NaN.
BOOST_AUTO_TEST_CASE(fully_masked_rows_stay_finite) {
  torch::manual_seed(9);
  const at::Tensor q = at::randn({1, 5, 4}).requires_grad_(true), k = at::randn({1, 5, 4}), v = at::randn({1, 5, 4});
  const at::Tensor mask = at::tensor(std::vector<int64_t>{0, 0, 1, 1, 1}).view({1, 5});
  const at::Tensor out = causal_self_attention(q, k, v, mask, 1, 1, 0.5, 0.0, false);
  BOOST_TEST(at::isfinite(out).all().item<bool>());
  out.sum().backward();
  BOOST_TEST(at::isfinite(q.grad()).all().item<bool>());
}

// Note [Attention memory] holds for the causal variant: nothing [Lq, Lk] per item is kept for backward.
BOOST_AUTO_TEST_CASE(holds_one_score_matrix_per_head_at_a_time) {
  torch::manual_seed(10);
  const int64_t batch = 16, length = 512, heads = 2, dim = 16;
  const Inputs in = random_inputs(batch, length, dim, at::kFloat, false);
  const size_t score_tensor = static_cast<size_t>(batch * heads * length * length) * sizeof(float);
  const size_t per_item = score_tensor / batch;
  const size_t ours = testing::peak_bytes_during(
      [&] { causal_self_attention(in.q, in.k, in.v, in.mask, heads, heads, 0.25, 0.1, true).sum().backward(); });
  BOOST_TEST_MESSAGE("peak bytes: blocked causal " << ours << ", one [B,H,L,L] " << score_tensor);
  // As the bidirectional bound, plus the [L, L] boolean future mask.
  BOOST_TEST(ours < 4 * per_item + static_cast<size_t>(length * length) +
                        16 * static_cast<size_t>(batch * length * dim) * sizeof(float));
  BOOST_TEST(ours < score_tensor / 2);
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace
}  // namespace hpctrain::models::detail
