// Note [Packed attention]: a row packed from documents (position_ids restarting at 0 in each, Note [Document
// boundaries]) gives every document the logits and loss it has alone, and the packed rows' loss the gradient the
// documents give alone, on GPT-2 (learned positions), Llama with grouped-query attention and Qwen2 (RoPE); with
// gradient checkpointing too. The attention itself: causal and block-diagonal, forward and backward, against each
// document alone, and the CUDA path's mask (causal_attention_bias) against the CPU blocks.
#include "fixtures.hpp"

#include "hpctrain/compat/torch.hpp"
#include "hpctrain/core/error.hpp"
#include "hpctrain/models/causal_lm.hpp"
#include "hpctrain/models/checkpointing.hpp"
#include "hpctrain/models/pretrained.hpp"
#include "models/attention.hpp"

#include <ATen/ATen.h>
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace hpctrain::models {
namespace {

using testing::golden_dir;

// max |a - b| / max |b|: the relative difference of two tensors.
double packed_relative_difference(const at::Tensor& a, const at::Tensor& b) {
  const double scale = std::max(b.abs().max().item<double>(), std::numeric_limits<double>::min());
  return (a.to(at::kDouble) - b.to(at::kDouble)).abs().max().item<double>() / scale;
}

// Rows of documents: row r holds documents of lengths[r] tokens, then padding up to the longest row.
struct PackedRowsFixture {
  at::Tensor input_ids, attention_mask, position_ids, labels, documents;
  std::vector<std::vector<std::pair<int64_t, int64_t>>> spans;  // per row: [first, end) of each document
};

PackedRowsFixture pack_rows(const std::vector<std::vector<int64_t>>& lengths, int64_t vocab) {
  PackedRowsFixture rows;
  int64_t longest = 0;
  for (const auto& row : lengths) {
    int64_t total = 0;
    for (int64_t n : row) total += n;
    longest = std::max(longest, total);
  }
  const auto batch = static_cast<int64_t>(lengths.size());
  rows.input_ids = at::randint(vocab, {batch, longest}, at::kLong);
  rows.attention_mask = at::zeros({batch, longest}, at::kLong);
  rows.position_ids = at::zeros({batch, longest}, at::kLong);
  rows.labels = at::full({batch, longest}, kIgnoreIndex, at::kLong);
  for (int64_t r = 0; r < batch; ++r) {
    rows.spans.emplace_back();
    int64_t at_token = 0;
    for (int64_t n : lengths[r]) {
      rows.spans.back().emplace_back(at_token, at_token + n);
      for (int64_t t = 0; t < n; ++t) {
        rows.attention_mask[r][at_token + t] = 1;
        rows.position_ids[r][at_token + t] = t;
        if (t > 0) rows.labels[r][at_token + t] = rows.input_ids[r][at_token + t];  // Note [Causal-LM labels]
      }
      at_token += n;
    }
    // Padding goes on counting from the last document (as loader::collate_text numbers it).
    for (int64_t t = at_token; t < longest; ++t) rows.position_ids[r][t] = lengths[r].back() + (t - at_token);
  }
  rows.documents = rows.position_ids.eq(0).cumsum(1);
  return rows;
}

const std::vector<std::vector<int64_t>> kPackedRows = {{5, 3, 7, 1}, {6, 4}};  // row 1 padded by 6; a 1-token document

// Per document: its loss sum (float64) over its own predictions, from logits [L, V] of its tokens.
double packed_document_loss(const at::Tensor& logits, const at::Tensor& ids) {
  if (ids.size(0) < 2) return 0.0;
  const at::Tensor log_probs = logits.slice(0, 0, -1).to(at::kDouble).log_softmax(-1);
  return -log_probs.gather(1, ids.slice(0, 1).unsqueeze(1)).sum().item<double>();
}

std::map<std::string, at::Tensor> take_gradients(CausalLM& model) {
  std::map<std::string, at::Tensor> out;
  for (const auto& item : model.named_parameters()) out[item.key()] = item.value().grad().clone();
  model.zero_grad();
  return out;
}

Loaded<CausalLM> load_packed_golden(const std::string& name) {
  Loaded<CausalLM> loaded = causal_lm_from_pretrained(golden_dir() / name);
  loaded.model->eval();  // no dropout: the documents' numbers can be compared
  return loaded;
}

BOOST_AUTO_TEST_SUITE(packed_rows)

BOOST_AUTO_TEST_CASE(each_document_of_a_packed_row_is_computed_as_alone) {
  for (const std::string name : {"tiny-gpt2-f32", "tiny-llama-gqa-llama3", "tiny-qwen2"}) {
    BOOST_TEST_CONTEXT(name) {
      at::manual_seed(3);
      Loaded<CausalLM> loaded = load_packed_golden(name);
      CausalLM& model = *loaded.model;
      const PackedRowsFixture rows = pack_rows(kPackedRows, model.vocab_size());
      ModelInputs packed;
      packed.input_ids = rows.input_ids;
      packed.attention_mask = rows.attention_mask;
      packed.position_ids = rows.position_ids;
      const at::Tensor logits = model.forward(packed).logits;
      causal_lm_loss_sum(logits, rows.labels).sum.backward();
      const auto packed_gradients = take_gradients(model);
      double worst_logits = 0, worst_loss = 0;
      for (std::size_t r = 0; r < kPackedRows.size(); ++r) {
        for (const auto& [first, end] : rows.spans[r]) {
          ModelInputs alone;
          alone.input_ids = rows.input_ids[static_cast<int64_t>(r)].slice(0, first, end).unsqueeze(0);
          const at::Tensor own = model.forward(alone).logits;
          causal_lm_loss_sum(own, alone.input_ids).sum.backward();  // accumulates over the documents
          const at::Tensor in_row = logits[static_cast<int64_t>(r)].slice(0, first, end);
          worst_logits = std::max(worst_logits, packed_relative_difference(in_row, own[0]));
          const double expected = packed_document_loss(own[0], alone.input_ids[0]);
          const double got = packed_document_loss(in_row, alone.input_ids[0]);
          worst_loss = std::max(worst_loss, std::abs(got - expected) / std::max(1.0, std::abs(expected)));
        }
      }
      BOOST_TEST(worst_logits < 1e-6);
      BOOST_TEST(worst_loss < 1e-6);
      // The packed rows' loss sum has the gradient of the documents' losses alone: the same SGD step.
      double worst_gradient = 0;
      for (const auto& [key, expected] : take_gradients(model))
        worst_gradient = std::max(worst_gradient, packed_relative_difference(packed_gradients.at(key), expected));
      BOOST_TEST(worst_gradient < 1e-5);
      // Gradient checkpointing recomputes each layer with the same positions and documents.
      set_gradient_checkpointing(model, true);
      causal_lm_loss_sum(model.forward(packed).logits, rows.labels).sum.backward();
      double worst_checkpointed = 0;
      for (const auto& [key, got] : take_gradients(model))
        worst_checkpointed = std::max(worst_checkpointed, packed_relative_difference(got, packed_gradients.at(key)));
      BOOST_TEST(worst_checkpointed < 1e-6);
      set_gradient_checkpointing(model, false);
      BOOST_TEST_MESSAGE(name << ": logits " << worst_logits << ", loss " << worst_loss << ", gradients "
                              << worst_gradient << ", checkpointed " << worst_checkpointed << " (relative)");
    }
  }
}

BOOST_AUTO_TEST_CASE(bf16_documents_are_close_to_alone) {
  at::manual_seed(4);
  Loaded<CausalLM> loaded = load_packed_golden("tiny-llama-gqa-llama3");
  const PackedRowsFixture rows = pack_rows(kPackedRows, loaded.model->vocab_size());
  ModelInputs packed;
  packed.input_ids = rows.input_ids;
  packed.attention_mask = rows.attention_mask;
  packed.position_ids = rows.position_ids;
  const compat::AutocastScope bf16(at::kCPU, true, at::kBFloat16);  // as --mixed-precision bf16
  const at::Tensor logits = loaded.model->forward(packed).logits;
  BOOST_TEST(logits.scalar_type() == at::kBFloat16);
  for (const auto& [first, end] : rows.spans[0]) {
    ModelInputs alone;
    alone.input_ids = rows.input_ids[0].slice(0, first, end).unsqueeze(0);
    BOOST_TEST(packed_relative_difference(logits[0].slice(0, first, end), loaded.model->forward(alone).logits[0]) < 2e-2);
  }
}

BOOST_AUTO_TEST_SUITE_END()

// ---- the attention ----

struct PackedQkv {
  at::Tensor q, k, v;
};

PackedQkv random_packed_qkv(int64_t batch, int64_t length, int64_t heads, int64_t kv_heads, int64_t head_dim) {
  return {at::randn({batch, length, heads * head_dim}, at::kFloat).requires_grad_(true),
          at::randn({batch, length, kv_heads * head_dim}, at::kFloat).requires_grad_(true),
          at::randn({batch, length, kv_heads * head_dim}, at::kFloat).requires_grad_(true)};
}

BOOST_AUTO_TEST_SUITE(packed_attention)

BOOST_AUTO_TEST_CASE(blocks_equal_each_document_alone_forward_and_backward) {
  at::manual_seed(5);
  constexpr int64_t heads = 4, kv_heads = 2, head_dim = 8;
  const double scale = 1.0 / std::sqrt(static_cast<double>(head_dim));
  const PackedRowsFixture rows = pack_rows(kPackedRows, 50);
  const int64_t batch = rows.input_ids.size(0), length = rows.input_ids.size(1);
  const PackedQkv in = random_packed_qkv(batch, length, heads, kv_heads, head_dim);
  const at::Tensor weights = at::randn({batch, length, heads * head_dim}) * rows.attention_mask.unsqueeze(-1);
  const at::Tensor out = detail::causal_self_attention(in.q, in.k, in.v, rows.attention_mask, heads, kv_heads, scale,
                                                       0.0, false, rows.documents);
  (out * weights).sum().backward();
  const at::Tensor dq = in.q.grad().clone(), dk = in.k.grad().clone(), dv = in.v.grad().clone();
  for (const auto* x : {&in.q, &in.k, &in.v}) x->grad().zero_();
  double worst = 0;
  for (int64_t r = 0; r < batch; ++r) {
    for (const auto& [first, end] : rows.spans[static_cast<std::size_t>(r)]) {
      auto slice = [&](const at::Tensor& x) { return x[r].slice(0, first, end).unsqueeze(0); };
      const at::Tensor own = detail::causal_self_attention(slice(in.q), slice(in.k), slice(in.v), at::Tensor(), heads,
                                                           kv_heads, scale, 0.0, false);
      (own * slice(weights)).sum().backward();
      worst = std::max(worst, packed_relative_difference(slice(out), own));
    }
  }
  BOOST_TEST(worst < 1e-6);
  // Padding keys and other documents give nothing: the gradients are the documents' alone (padding rows of q get
  // none either way: their output has weight 0).
  BOOST_TEST(packed_relative_difference(dq, in.q.grad()) < 1e-6);
  BOOST_TEST(packed_relative_difference(dk, in.k.grad()) < 1e-6);
  BOOST_TEST(packed_relative_difference(dv, in.v.grad()) < 1e-6);
}

BOOST_AUTO_TEST_CASE(the_cuda_mask_is_future_or_other_document) {
  at::manual_seed(6);
  constexpr int64_t heads = 2, head_dim = 4;
  const PackedRowsFixture rows = pack_rows(kPackedRows, 50);
  const int64_t batch = rows.input_ids.size(0), length = rows.input_ids.size(1);
  const PackedQkv in = random_packed_qkv(batch, length, heads, heads, head_dim);
  at::NoGradGuard no_grad;
  const at::Tensor padding = rows.attention_mask.to(at::kFloat).neg().add(1).mul(std::numeric_limits<float>::lowest());
  const at::Tensor bias = detail::causal_attention_bias(padding.view({batch, 1, 1, length}), rows.documents, length);
  BOOST_TEST(bias.sizes() == at::IntArrayRef({batch, 1, length, length}));
  // Token 6 (document 1 of row 0, which spans 5..7) sees keys 5 and 6 only.
  const at::Tensor visible = bias[0][0][6].eq(0);
  BOOST_TEST(visible.nonzero().flatten().equal(at::tensor({5, 6}, at::kLong)));
  // softmax(q k^T * scale + bias) v, by hand, equals the CPU blocks.
  auto heads_first = [&](const at::Tensor& x) { return x.view({batch, length, heads, head_dim}).transpose(1, 2); };
  const double scale = 1.0 / std::sqrt(static_cast<double>(head_dim));
  const at::Tensor probs = (at::matmul(heads_first(in.q), heads_first(in.k).transpose(-1, -2)) * scale + bias).softmax(-1);
  const at::Tensor by_hand = at::matmul(probs, heads_first(in.v)).transpose(1, 2).reshape({batch, length, heads * head_dim});
  const at::Tensor blocks = detail::causal_self_attention(in.q, in.k, in.v, rows.attention_mask, heads, heads, scale, 0.0,
                                                          false, rows.documents);
  const at::Tensor real = rows.attention_mask.to(at::kBool);
  BOOST_TEST(packed_relative_difference(blocks.index({real}), by_hand.index({real})) < 1e-6);
}

BOOST_AUTO_TEST_CASE(documents_need_whole_rows) {
  const PackedQkv in = random_packed_qkv(1, 4, 2, 2, 4);
  const at::Tensor documents = at::zeros({1, 3}, at::kLong);
  BOOST_CHECK_THROW((void)detail::causal_self_attention(in.q, in.k, in.v, at::Tensor(), 2, 2, 0.5, 0.0, false, documents),
                    Error);
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace
}  // namespace hpctrain::models
