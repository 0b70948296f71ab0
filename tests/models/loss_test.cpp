// The one loss (loss.hpp, Note [Chunked loss]): the chunked head + cross-entropy equals the unchunked computation
// from forward()'s logits — the loss and every parameter's gradient within 1e-6 relative in fp32 — on GPT-2 (tied
// head), Llama (untied, and tied) and Qwen2, with padding and masked prompt tokens, in training mode (dropout on);
// on rows packed from documents (position_ids, labels -100 at document starts); under bf16 autocast within bf16's
// tolerance of fp32; with LoRA on the head; per-target losses for evaluation;
// and clear errors.
#include "fixtures.hpp"
#include "../error_capture.hpp"

#include "hpctrain/compat/torch.hpp"
#include "hpctrain/models/causal_lm.hpp"
#include "hpctrain/models/lora.hpp"
#include "hpctrain/models/loss.hpp"
#include "hpctrain/models/nf4.hpp"
#include "hpctrain/models/pretrained.hpp"

#include <ATen/ATen.h>
#include <torch/utils.h>
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <functional>
#include <map>
#include <string>

namespace hpctrain::models {
namespace {

using hpctrain::testing::contains;
using hpctrain::testing::error_message;

constexpr double kFp32Relative = 1e-6;  // the bound: chunking changes only the summation order
constexpr int64_t kRows = 3, kLength = 9;

Loaded<CausalLM> load_lm(const std::string& name) {
  Loaded<CausalLM> loaded = causal_lm_from_pretrained(testing::golden_dir() / name);
  loaded.model->train();  // dropout on (GPT-2's): both computations draw the same seeds in the same order
  return loaded;
}

// Right-padded rows of 9, 6 and 4 tokens; labels -100 on the padding and on row 0's two "prompt" tokens.
ModelInputs masked_batch(int64_t vocab) {
  torch::manual_seed(5);
  ModelInputs inputs;
  inputs.input_ids = at::randint(3, vocab, {kRows, kLength}, at::kLong);
  const at::Tensor lengths = at::tensor(std::vector<int64_t>{9, 6, 4}, at::kLong);
  inputs.attention_mask = at::arange(kLength, at::kLong).unsqueeze(0).lt(lengths.unsqueeze(1)).to(at::kLong);
  inputs.labels = inputs.input_ids.masked_fill(inputs.attention_mask.eq(0), kIgnoreIndex);
  inputs.labels.index_put_({0, at::indexing::Slice(0, 2)}, kIgnoreIndex);
  return inputs;
}

// The unchunked reference, written here from forward()'s logits: -log_softmax at each position's next label.
at::Tensor reference_loss_sum(CausalLM& model, const ModelInputs& inputs) {
  ModelInputs bare = inputs;
  bare.labels = at::Tensor();
  const at::Tensor logits = model.forward(bare).logits.to(at::kFloat);
  const at::Tensor next = inputs.labels.slice(1, 1).reshape(-1);
  const at::Tensor predicted = next.ne(kIgnoreIndex).nonzero().squeeze(1);
  const at::Tensor rows = logits.slice(1, 0, kLength - 1).reshape({-1, logits.size(2)}).index_select(0, predicted);
  return -rows.log_softmax(1).gather(1, next.index_select(0, predicted).unsqueeze(1)).sum();
}

struct LossAndGradients {
  double loss = 0;
  std::map<std::string, at::Tensor> gradients;  // the parameters that require grad, by name
};

LossAndGradients run(CausalLM& model, const std::function<at::Tensor()>& loss_of) {
  for (auto& parameter : model.parameters()) parameter.mutable_grad() = at::Tensor();
  torch::manual_seed(21);  // the same dropout seeds for every computation
  const at::Tensor loss = loss_of();
  loss.backward();
  LossAndGradients out;
  out.loss = loss.item<double>();
  for (const auto& item : model.named_parameters())
    if (item.value().requires_grad()) out.gradients[item.key()] = item.value().grad().clone();
  return out;
}

// next_token_loss's sum with `run`; its count in `count`.
LossAndGradients run_chunked(CausalLM& model, const ModelInputs& inputs, int64_t chunk, int64_t& count) {
  return run(model, [&] {
    const TokenLossSum loss = model.next_token_loss(inputs, chunk);
    count = loss.count.item<int64_t>();
    return loss.sum;
  });
}

// ||got - expected|| / ||expected|| (2-norms), 0 when both are zero.
double relative_difference(const at::Tensor& got, const at::Tensor& expected) {
  const double scale = expected.to(at::kDouble).norm().item<double>();
  const double diff = (got.to(at::kDouble) - expected.to(at::kDouble)).norm().item<double>();
  return scale > 0 ? diff / scale : diff;
}

// Attention's key bias: softmax is blind to it (q.(k + b) shifts every score of a query alike), so its exact gradient
// is 0 and both computations hold rounding noise of about 1e-8 there (compare_weights.py --skip says the same).
bool exact_gradient_is_zero(const std::string& name) { return name.find("k_proj.bias") != std::string::npos; }

// Every gradient and the loss of `got` within `tolerance` of `expected`; returns the worst relative difference.
double check_close(const LossAndGradients& got, const LossAndGradients& expected, double tolerance) {
  double worst = std::abs(got.loss - expected.loss) / std::abs(expected.loss);
  BOOST_TEST(worst <= tolerance, "loss " << got.loss << " vs " << expected.loss);
  BOOST_TEST(got.gradients.size() == expected.gradients.size());
  for (const auto& [name, gradient] : expected.gradients) {
    BOOST_TEST_CONTEXT(name) {
      BOOST_TEST_REQUIRE(got.gradients.count(name) == 1u);
      BOOST_TEST_REQUIRE(got.gradients.at(name).defined() == gradient.defined());
      if (!gradient.defined() || exact_gradient_is_zero(name)) continue;
      const double difference = relative_difference(got.gradients.at(name), gradient);
      BOOST_TEST(difference <= tolerance);
      worst = std::max(worst, difference);
    }
  }
  return worst;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(chunked_loss)

BOOST_AUTO_TEST_CASE(equals_the_unchunked_loss_and_gradients_in_fp32) {
  for (const std::string name : {"tiny-gpt2-f32", "tiny-llama-gqa-llama3", "tiny-llama-tied", "tiny-qwen2"}) {
    BOOST_TEST_CONTEXT(name) {
      Loaded<CausalLM> loaded = load_lm(name);
      CausalLM& model = *loaded.model;
      const ModelInputs inputs = masked_batch(model.vocab_size());
      const LossAndGradients expected = run(model, [&] { return reference_loss_sum(model, inputs); });
      double worst = 0;
      // 1 and 4 tokens per chunk (the 15 predicted tokens end in a partial chunk), all at once, and unchunked (0).
      for (const int64_t chunk : {int64_t{1}, int64_t{4}, int64_t{64}, int64_t{0}}) {
        BOOST_TEST_CONTEXT("--loss-chunk-tokens " << chunk) {
          int64_t count = 0;
          const LossAndGradients got = run_chunked(model, inputs, chunk, count);
          BOOST_TEST(count == 15);  // 8 + 5 + 3 next tokens, less row 0's masked second label
          worst = std::max(worst, check_close(got, expected, kFp32Relative));
        }
      }
      BOOST_TEST_MESSAGE(name << ": chunked vs unchunked, worst relative difference " << worst);
      BOOST_TEST(loaded.model->tied_head() == (expected.gradients.count("lm_head.weight") == 0));
    }
  }
}

// Rows packed from documents (issue 33, Note [Packed attention]): position_ids restart at each document, whose
// first token has label -100 (not predicted from the previous document); no padding.
ModelInputs packed_batch(int64_t vocab) {
  torch::manual_seed(6);
  ModelInputs inputs;
  inputs.input_ids = at::randint(3, vocab, {2, kLength}, at::kLong);
  inputs.position_ids = at::tensor(std::vector<int64_t>{0, 1, 2, 3, 0, 1, 2, 0, 1, 0, 1, 2, 3, 4, 5, 6, 7, 8}, at::kLong)
                            .view({2, kLength});
  inputs.labels = inputs.input_ids.masked_fill(inputs.position_ids.eq(0), kIgnoreIndex);
  return inputs;
}

BOOST_AUTO_TEST_CASE(packed_rows_equal_the_unchunked_loss_and_gradients) {
  for (const std::string name : {"tiny-gpt2-f32", "tiny-llama-gqa-llama3", "tiny-qwen2"}) {
    BOOST_TEST_CONTEXT(name) {
      Loaded<CausalLM> loaded = load_lm(name);
      CausalLM& model = *loaded.model;
      const ModelInputs inputs = packed_batch(model.vocab_size());
      const LossAndGradients expected = run(model, [&] { return reference_loss_sum(model, inputs); });
      for (const int64_t chunk : {int64_t{3}, int64_t{0}}) {
        BOOST_TEST_CONTEXT("--loss-chunk-tokens " << chunk) {
          int64_t count = 0;
          const LossAndGradients got = run_chunked(model, inputs, chunk, count);
          BOOST_TEST(count == 14);  // 16 next tokens less the two documents started inside row 0
          (void)check_close(got, expected, kFp32Relative);
        }
      }
    }
  }
}

// Under bf16 autocast the head's products run in bf16 and the log-sum-exp in fp32 (as transformers): the loss and
// gradients are within bf16's tolerance of fp32's and close to the unchunked bf16 computation.
BOOST_AUTO_TEST_CASE(bf16_autocast_is_within_tolerance_of_fp32) {
  for (const std::string name : {"tiny-gpt2-f32", "tiny-llama-gqa-llama3"}) {
    BOOST_TEST_CONTEXT(name) {
      Loaded<CausalLM> loaded = load_lm(name);
      CausalLM& model = *loaded.model;
      const ModelInputs inputs = masked_batch(model.vocab_size());
      const LossAndGradients fp32 = run(model, [&] { return model.next_token_loss(inputs, 4).sum; });
      const auto in_bf16 = [&](int64_t chunk) {
        return run(model, [&] {
          const compat::AutocastScope bf16(at::kCPU, true, at::kBFloat16);
          return model.next_token_loss(inputs, chunk).sum;
        });
      };
      const LossAndGradients chunked = in_bf16(4), unchunked = in_bf16(0);
      BOOST_TEST(chunked.loss != fp32.loss);  // the products did run in bf16
      const double from_fp32 = check_close(chunked, fp32, 3e-2), from_unchunked = check_close(chunked, unchunked, 1e-2);
      BOOST_TEST_MESSAGE(name << ": bf16 chunked vs fp32 " << from_fp32 << ", vs bf16 unchunked " << from_unchunked);
    }
  }
}

// LoRA on the head (--lora-target-modules lm_head, peft's name): the adapter's factors get the unchunked gradients,
// with its dropout on; all-linear leaves the head out, as peft's does.
BOOST_AUTO_TEST_CASE(lora_on_the_head_gets_exact_gradients) {
  Loaded<CausalLM> loaded = load_lm("tiny-llama-gqa-llama3");
  CausalLM& model = *loaded.model;
  LoraConfig config;
  config.r = 4, config.alpha = 8, config.dropout = 0.25, config.target_modules = {"lm_head", "q_proj"};
  const LoraLayout layout = apply_lora(model, config);
  BOOST_TEST(std::count(layout.adapted.begin(), layout.adapted.end(), "lm_head") == 1);
  {
    at::NoGradGuard no_grad;
    torch::manual_seed(3);
    for (auto& item : model.named_parameters())
      if (item.key().find("lora_B") != std::string::npos) item.value().normal_(0, 0.5);  // a trained adapter
  }
  const ModelInputs inputs = masked_batch(model.vocab_size());
  const LossAndGradients expected = run(model, [&] { return reference_loss_sum(model, inputs); });
  BOOST_TEST(expected.gradients.count("lm_head.lora_A.weight") == 1u);
  BOOST_TEST(expected.gradients.count("lm_head.weight") == 0u);  // the base is frozen
  for (const int64_t chunk : {int64_t{3}, int64_t{0}}) {
    BOOST_TEST_CONTEXT("--loss-chunk-tokens " << chunk) {
      (void)check_close(run(model, [&] { return model.next_token_loss(inputs, chunk).sum; }), expected, kFp32Relative);
    }
  }

  Loaded<CausalLM> other = load_lm("tiny-llama-gqa-llama3");
  LoraConfig all_linear;
  all_linear.target_modules = {"all-linear"};
  const LoraLayout every = apply_lora(*other.model, all_linear);
  BOOST_TEST(std::count(every.adapted.begin(), every.adapted.end(), "lm_head") == 0);
  BOOST_TEST(every.adapted.size() == 14u);  // 7 projections x 2 layers
}

// Evaluation's per-position losses: each predicted position's -log p(next token), 0 elsewhere, no gradient.
BOOST_AUTO_TEST_CASE(per_position_losses_for_evaluation) {
  Loaded<CausalLM> loaded = load_lm("tiny-qwen2");
  CausalLM& model = *loaded.model;
  model.eval();
  const ModelInputs inputs = masked_batch(model.vocab_size());
  ModelInputs bare = inputs;
  bare.labels = at::Tensor();
  at::NoGradGuard no_grad;
  const at::Tensor log_probs = model.forward(bare).logits.log_softmax(-1);
  const at::Tensor next = shift_labels(inputs.labels);
  for (const int64_t chunk : {int64_t{2}, int64_t{0}}) {
    const at::Tensor losses = model.next_token_losses(inputs, chunk);
    BOOST_TEST(losses.sizes() == inputs.input_ids.sizes());
    BOOST_TEST(!losses.requires_grad());
    const at::Tensor expected =
        -log_probs.gather(2, next.clamp_min(0).unsqueeze(2)).squeeze(2).masked_fill(next.eq(kIgnoreIndex), 0);
    BOOST_TEST(testing::max_abs_diff(losses, expected) < 1e-5);
    BOOST_TEST(losses.masked_select(next.eq(kIgnoreIndex)).abs().sum().item<double>() == 0.0);
  }
}

// Note [Quantized embeddings]: a head held in 4 bits (LmHead::quantized) gives the loss, its hidden gradient, the
// per-target losses and the logits of its dequantized weight (its products fused on an AVX-512 CPU, Note [Fused
// 4-bit product]; elsewhere the chunked loss dequantizes it), chunked and unchunked, over more tokens than one pass
// of the fused product (256) and an odd vocabulary.
BOOST_AUTO_TEST_CASE(a_4bit_head_equals_its_dequantized_weight) {
  torch::manual_seed(9);
  const int64_t vocab = 301, width = 96;
  const Quant4Weight quantized = quantize_4bit(at::randn({vocab, width}) * 0.1, Quant4Options{}, "lm_head.weight");
  LmHead four_bit, reference;
  four_bit.quantized = quantized;
  reference.weight = dequantize_4bit(quantized, at::kFloat);
  BOOST_TEST(four_bit.vocab_size() == vocab);
  BOOST_TEST(four_bit.width() == width);
  const at::Tensor hidden = at::randn({2, 150, width});
  const at::Tensor targets = at::randint(0, vocab, {2, 150}, at::kLong).index_put_({0, at::indexing::Slice(0, 7)},
                                                                                   kIgnoreIndex);
  const auto loss_and_gradient = [&](const LmHead& head, int64_t chunk) {
    const at::Tensor input = hidden.clone().requires_grad_(true);
    const TokenLossSum loss = linear_cross_entropy(input, head, targets, chunk);
    loss.sum.backward();
    BOOST_TEST(loss.count.item<int64_t>() == 293);
    return std::make_pair(loss.sum.detach(), input.grad());
  };
  for (const int64_t chunk : {int64_t{0}, int64_t{7}, int64_t{256}}) {
    BOOST_TEST_CONTEXT("--loss-chunk-tokens " << chunk) {
      const auto [loss, grad] = loss_and_gradient(four_bit, chunk);
      const auto [expected_loss, expected_grad] = loss_and_gradient(reference, chunk);
      BOOST_TEST(relative_difference(loss, expected_loss) < 1e-6);
      BOOST_TEST(relative_difference(grad, expected_grad) < 1e-5);
      BOOST_TEST(relative_difference(linear_cross_entropy_per_target(hidden, four_bit, targets, chunk),
                                     linear_cross_entropy_per_target(hidden, reference, targets, chunk)) < 1e-5);
    }
  }
  at::NoGradGuard no_grad;
  BOOST_TEST(relative_difference(four_bit.logits(hidden), reference.logits(hidden)) < 1e-5);
}

BOOST_AUTO_TEST_CASE(bad_targets_and_shapes_are_named) {
  Loaded<CausalLM> loaded = load_lm("tiny-llama-gqa-llama3");
  CausalLM& model = *loaded.model;
  ModelInputs inputs = masked_batch(model.vocab_size());
  inputs.labels = inputs.labels.clone();
  inputs.labels.index_put_({1, 2}, 64);
  BOOST_TEST(contains(error_message([&] { (void)model.next_token_loss(inputs, 4); }),
                      "target id 64 is outside the vocabulary [0, 64)"));
  inputs.labels = inputs.labels.slice(1, 1);
  BOOST_TEST(contains(error_message([&] { (void)model.next_token_loss(inputs, 4); }),
                      "labels must be [batch, sequence] = [3, 9]"));
  const LmHead head = model.head();
  BOOST_TEST(contains(error_message([&] {
                        (void)linear_cross_entropy(at::zeros({4, 7}), head, at::zeros({4}, at::kLong), 4);
                      }),
                      "hidden states [4, 7] do not fit the head's weight [64, 32]"));
  BOOST_TEST(contains(error_message([&] {
                        (void)linear_cross_entropy(at::zeros({4, 32}), head, at::zeros({4}, at::kLong), -1);
                      }),
                      "--loss-chunk-tokens -1"));
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace hpctrain::models
