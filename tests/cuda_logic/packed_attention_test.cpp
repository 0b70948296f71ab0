// Note [Packed attention]: the CUDA path of causal attention for rows packed from documents, run on the CPU. Its mask
// (causal_attention_bias: future or other document, plus padding) and, in LibTorch 2, the very function the CUDA
// branch calls (detail::causal_sdpa, SDPA with that mask) against the CPU's blocked attention, forward and backward.
#include <boost/test/unit_test.hpp>

#include <ATen/ATen.h>

#include <cmath>
#include <limits>

#include "models/attention.hpp"

namespace {

using namespace hpctrain::models::detail;

// Two rows: documents of 3, 4 and 2 tokens; documents of 5 and 2 tokens and 2 padding tokens (which continue the
// last document, as the loader numbers them).
struct PackedRowsOnCpu {
  at::Tensor key_mask = at::tensor({1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0}, at::kLong).view({2, 9});
  at::Tensor documents = at::tensor({1, 1, 1, 2, 2, 2, 2, 3, 3, 1, 1, 1, 1, 1, 2, 2, 2, 2}, at::kLong).view({2, 9});
};

at::Tensor packed_padding_bias(const at::Tensor& key_mask) {
  return key_mask.to(at::kFloat).neg().add(1).mul(std::numeric_limits<float>::lowest()).view({key_mask.size(0), 1, 1, -1});
}

double packed_max_difference(const at::Tensor& a, const at::Tensor& b) { return (a - b).abs().max().item<double>(); }

}  // namespace

BOOST_AUTO_TEST_SUITE(packed_attention_cuda_path)

BOOST_AUTO_TEST_CASE(mask_hides_the_future_other_documents_and_padding) {
  const PackedRowsOnCpu rows;
  const at::Tensor bias = causal_attention_bias(packed_padding_bias(rows.key_mask), rows.documents, 9);
  BOOST_TEST(bias.sizes() == at::IntArrayRef({2, 1, 9, 9}));
  const at::Tensor visible = bias.squeeze(1).eq(0);
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t i = 0; i < 9; ++i)
      for (int64_t j = 0; j < 9; ++j) {
        const bool expected = j <= i && rows.documents[b][i].item<int64_t>() == rows.documents[b][j].item<int64_t>() &&
                              rows.key_mask[b][j].item<int64_t>() == 1;
        BOOST_TEST(visible[b][i][j].item<bool>() == expected, "row " << b << ", query " << i << ", key " << j);
      }
  // Without documents: causal and padding only, bottom-right aligned for fewer queries (a KV cache).
  const at::Tensor cached = causal_attention_bias(packed_padding_bias(rows.key_mask), at::Tensor(), 2);
  BOOST_TEST(cached.sizes() == at::IntArrayRef({2, 1, 2, 9}));
  BOOST_TEST(cached[0][0][0].eq(0).sum().item<int64_t>() == 8);
}

#if HPCTRAIN_TORCH_2
BOOST_AUTO_TEST_CASE(sdpa_with_the_mask_equals_the_cpu_blocks) {
  at::manual_seed(7);
  const PackedRowsOnCpu rows;
  constexpr int64_t heads = 2, head_dim = 4;
  auto make = [] { return at::randn({2, 9, heads * head_dim}, at::kFloat).requires_grad_(true); };
  const at::Tensor q = make(), k = make(), v = make();
  const double scale = 0.3;  // not 1/sqrt(d): the path's rescaling of q is exercised
  const at::Tensor real = rows.key_mask.to(at::kBool);
  const at::Tensor weights = at::randn({2, 9, heads * head_dim}) * rows.key_mask.unsqueeze(-1);
  const at::Tensor blocked = causal_self_attention(q, k, v, rows.key_mask, heads, heads, scale, 0.0, false, rows.documents);
  (blocked * weights).sum().backward();
  const at::Tensor dq = q.grad().clone(), dk = k.grad().clone(), dv = v.grad().clone();
  for (const at::Tensor* x : {&q, &k, &v}) x->grad().zero_();
  auto heads_first = [](const at::Tensor& x) { return x.view({2, 9, heads, head_dim}).transpose(1, 2); };
  const at::Tensor sdpa = causal_sdpa(heads_first(q), heads_first(k), heads_first(v), rows.key_mask,
                                      packed_padding_bias(rows.key_mask), rows.documents, scale, 0.0)
                              .transpose(1, 2)
                              .reshape({2, 9, heads * head_dim});
  (sdpa * weights).sum().backward();
  BOOST_TEST(packed_max_difference(blocked.index({real}), sdpa.index({real})) < 1e-5);
  BOOST_TEST(packed_max_difference(dq, q.grad()) < 1e-5);
  BOOST_TEST(packed_max_difference(dk, k.grad()) < 1e-5);
  BOOST_TEST(packed_max_difference(dv, v.grad()) < 1e-5);
}
#endif

BOOST_AUTO_TEST_SUITE_END()
