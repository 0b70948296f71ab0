// The chunked fused head + cross-entropy (chunked_cross_entropy.hpp, Note [Chunked loss] in loss.hpp).
#include "models/chunked_cross_entropy.hpp"

#include "hpctrain/compat/autocast_state.hpp"
#include "hpctrain/compat/torch.hpp"
#include "hpctrain/core/error.hpp"
#include "hpctrain/models/quantized_linear.hpp"
#include "models/fused_quant4.hpp"

#include <ATen/ATen.h>
#include <torch/autograd.h>

#include <algorithm>
#include <optional>

namespace hpctrain::models::detail {
namespace {

// Which of the product's inputs get a gradient.
struct WantedGradients {
  bool hidden = false, weight = false, lora_input = false, lora_weight = false;
};

// Gradients of the summed loss (an incoming gradient of 1), in the inputs' dtypes; undefined where not wanted.
struct HeadGradients {
  at::Tensor hidden, weight, lora_input, lora_weight;
};

// The tensors one pass over the chunks reuses: a chunk's logits in the products' dtype and, when that is not
// float32, their float32 copy (Note [Chunked loss]: nothing [chunk, V] is allocated per chunk).
struct ChunkBuffers {
  at::Tensor logits, upcast, minus_one;
};

// accumulator (float32 or float64) += a @ b, where a and b are in the products' dtype. bf16/fp16 products are
// summed over the chunks in float32, a block of rows at a time: a whole [V, D] product would be a temporary of the
// weight's size, and adding it to the float32 accumulator casts it into another.
void accumulate_product(at::Tensor& accumulator, const at::Tensor& a, const at::Tensor& b) {
  if (a.scalar_type() == accumulator.scalar_type()) {
    accumulator.addmm_(a, b);
    return;
  }
  constexpr int64_t kBlockRows = 4096;
  for (int64_t first = 0; first < a.size(0); first += kBlockRows) {
    const int64_t rows = std::min(kBlockRows, a.size(0) - first);
    accumulator.narrow(0, first, rows).add_(at::mm(a.narrow(0, first, rows), b));
  }
}

class ChunkPass {
 public:
  ChunkPass(const HeadProduct& product, int64_t chunk_tokens)
      : compute_(head_compute_dtype(product)),
        accumulate_(compute_ == at::kDouble ? at::kDouble : at::kFloat),
        product_(product),
        options_(product.hidden.options().dtype(compute_)),
        lora_weight_(product.lora_input.defined() ? product.lora_weight.to(compute_) : at::Tensor()),
        rows_(std::max<int64_t>(1, std::min(chunk_tokens, product.hidden.size(0)))) {
    // A 4-bit head (Note [Quantized embeddings]) multiplies fused where it can, else is dequantized once here.
    if (product.quantized == nullptr) weight_ = product.weight.to(compute_);
    else if (quant4_product_fused(product.hidden.device(), compute_)) fused_.emplace(*product.quantized);
    else weight_ = dequantize_4bit(*product.quantized, compute_);
  }

  // The summed loss as a float64 scalar (a float32 sum of many small chunks drifts from the unchunked sum); each target's loss into `per_target` [n] when it is defined;
  // the gradients `wanted` asks for into `grads`.
  at::Tensor run(const at::Tensor& targets, const at::Tensor& per_target, const WantedGradients& wanted,
                 HeadGradients& grads) {
    const int64_t n = product_.hidden.size(0);
    allocate_gradients(wanted, grads);
    const at::TensorOptions& options = options_;
    at::Tensor sum = at::zeros({}, options.dtype(at::kDouble));
    {
      ChunkBuffers buffers;  // freed before the gradients change dtype
      buffers.logits = at::empty({rows_, vocab()}, options);
      buffers.upcast = compute_ == accumulate_ ? buffers.logits : at::empty({rows_, vocab()}, options.dtype(accumulate_));
      buffers.minus_one = at::full({rows_, 1}, -1.0, options.dtype(accumulate_));
      for (int64_t first = 0; first < n; first += rows_) {
        const int64_t rows = std::min(rows_, n - first);
        const at::Tensor loss = chunk(first, rows, targets.narrow(0, first, rows).unsqueeze(1), buffers, wanted, grads);
        if (per_target.defined()) per_target.narrow(0, first, rows).copy_(loss);
        sum.add_(loss.sum(at::kDouble));
      }
    }
    finish_gradients(grads);
    return sum;
  }

 private:
  int64_t vocab() const { return fused_ ? fused_->out_features() : weight_.size(0); }

  void allocate_gradients(const WantedGradients& wanted, HeadGradients& grads) const {
    const int64_t n = product_.hidden.size(0);
    const at::TensorOptions& options = options_;
    if (wanted.hidden) grads.hidden = at::empty({n, product_.hidden.size(1)}, options);
    if (wanted.weight) grads.weight = at::zeros({vocab(), product_.hidden.size(1)}, options.dtype(accumulate_));
    if (wanted.lora_input) grads.lora_input = at::empty({n, lora_weight_.size(1)}, options);
    if (wanted.lora_weight) grads.lora_weight = at::zeros(lora_weight_.sizes(), options.dtype(accumulate_));
  }

  // One chunk of `rows` tokens from `first`: returns their losses [rows] (accumulator dtype) and adds their part
  // of the gradients (Note [Chunked loss]: G = softmax - one_hot, in the products' dtype as autocast's backward).
  at::Tensor chunk(int64_t first, int64_t rows, const at::Tensor& targets, ChunkBuffers& buffers,
                   const WantedGradients& wanted, HeadGradients& grads) {
    const at::Tensor hidden = product_.hidden.narrow(0, first, rows).to(compute_).contiguous();
    at::Tensor logits = buffers.logits.narrow(0, 0, rows);
    if (fused_) fused_->linear_out(hidden, logits);
    else at::mm_out(logits, hidden, weight_.t());
    at::Tensor lora_input;
    if (lora_weight_.defined()) {
      lora_input = product_.lora_input.narrow(0, first, rows).to(compute_);
      logits.addmm_(lora_input, lora_weight_.t());
    }
    at::Tensor scores = buffers.upcast.narrow(0, 0, rows);
    if (compute_ != accumulate_) scores.copy_(logits);  // the log-sum-exp in float32, as transformers' loss
    // log-sum-exp in place (at::logsumexp would allocate two more [rows, V]): loss = max + log(sum exp(z - max)) - z_t.
    const at::Tensor target_logit = scores.gather(1, targets);
    const at::Tensor max = at::amax(scores, {1}, /*keepdim=*/true);
    const at::Tensor exp_sum = scores.sub_(max).exp_().sum(1, /*keepdim=*/true);
    const at::Tensor loss = (exp_sum.log() + max - target_logit).squeeze(1);
    if (!(wanted.hidden || wanted.weight || wanted.lora_input || wanted.lora_weight)) return loss;
    scores.div_(exp_sum);                                                 // softmax
    scores.scatter_add_(1, targets, buffers.minus_one.narrow(0, 0, rows));  // - one_hot
    at::Tensor gradient = scores;
    if (compute_ != accumulate_) gradient = logits.copy_(scores);  // the logits' buffer is free again
    if (wanted.hidden) {
      at::Tensor slice = grads.hidden.narrow(0, first, rows);
      if (fused_) fused_->input_grad_out(gradient, slice);
      else at::mm_out(slice, gradient, weight_);
    }
    if (wanted.weight) accumulate_product(grads.weight, gradient.t(), hidden);
    if (wanted.lora_input) {
      at::Tensor slice = grads.lora_input.narrow(0, first, rows);
      at::mm_out(slice, gradient, lora_weight_);
    }
    if (wanted.lora_weight) accumulate_product(grads.lora_weight, gradient.t(), lora_input);
    return loss;
  }

  // The gradients in their inputs' dtypes (float32 weights under bf16 autocast, as autocast's cast backward gives).
  void finish_gradients(HeadGradients& grads) const {
    const auto cast = [](at::Tensor& grad, const at::Tensor& input) {
      if (grad.defined()) grad = grad.to(input.scalar_type());
    };
    cast(grads.hidden, product_.hidden);
    cast(grads.weight, product_.weight);
    cast(grads.lora_input, product_.lora_input);
    cast(grads.lora_weight, product_.lora_weight);
  }

  c10::ScalarType compute_, accumulate_;
  const HeadProduct& product_;
  at::TensorOptions options_;                  // the products' dtype on hidden's device
  at::Tensor weight_, lora_weight_;            // in the products' dtype (weight_ undefined when fused_)
  std::optional<FusedQuant4Weight> fused_;     // a 4-bit head's fused products
  int64_t rows_;                     // tokens per chunk
};

// Runs the chunks with autocast off: the products' dtype is decided once (head_compute_dtype) and cast to here.
at::Tensor run_chunks(const HeadProduct& product, const at::Tensor& targets, int64_t chunk_tokens,
                      const at::Tensor& per_target, const WantedGradients& wanted, HeadGradients& grads) {
  ChunkPass pass(product, chunk_tokens);
  const c10::DeviceType device = product.hidden.device().type();
  std::optional<compat::AutocastScope> no_autocast;
  if (compat::AutocastScope::is_enabled(device)) no_autocast.emplace(device, /*enabled=*/false);
  return pass.run(targets, per_target, wanted, grads).to(at::kFloat);
}

// Note [Chunked loss]: forward computes the loss and the gradient of the summed loss at once; backward scales the
// saved gradients by the incoming one (in place: they are this node's alone and backward runs once).
class LinearCrossEntropy : public torch::autograd::Function<LinearCrossEntropy> {
 public:
  // The LoRA factors are optional (LibTorch 1.13's Function takes no undefined tensor as an input).
  // A 4-bit head comes as `quantized` with no weight (it is frozen).
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& hidden,
                            const c10::optional<at::Tensor>& weight, const Quant4Weight* quantized,
                            const c10::optional<at::Tensor>& lora_input, const c10::optional<at::Tensor>& lora_weight,
                            const at::Tensor& targets, int64_t chunk_tokens) {
    const HeadProduct product{hidden, weight.value_or(at::Tensor()), quantized, lora_input.value_or(at::Tensor()),
                              lora_weight.value_or(at::Tensor())};
    WantedGradients wanted;
    wanted.hidden = hidden.requires_grad(), wanted.weight = product.weight.defined() && product.weight.requires_grad();
    wanted.lora_input = product.lora_input.defined() && product.lora_input.requires_grad();
    wanted.lora_weight = product.lora_weight.defined() && product.lora_weight.requires_grad();
    HeadGradients grads;
    const at::Tensor sum = run_chunks(product, targets, chunk_tokens, at::Tensor(), wanted, grads);
    const auto save = [&](const char* key, const at::Tensor& grad) {
      if (grad.defined()) ctx->saved_data[key] = grad;
    };
    save("hidden", grads.hidden), save("weight", grads.weight);
    save("lora_input", grads.lora_input), save("lora_weight", grads.lora_weight);
    return sum;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    const at::Tensor& incoming = grad_outputs[0];
    const auto take = [&](const char* key) -> at::Tensor {
      const auto found = ctx->saved_data.find(key);
      if (found == ctx->saved_data.end()) return at::Tensor();
      at::Tensor grad = found->second.toTensor();
      ctx->saved_data.erase(found);
      return incoming.defined() ? grad.mul_(incoming) : grad.zero_();
    };
    HPCTRAIN_CHECK(!ctx->saved_data.empty(), "the chunked loss: backward ran a second time through the same graph "
                   "(Note [Chunked loss]: its saved gradients are consumed by the first)");
    return {take("hidden"), take("weight"), at::Tensor(), take("lora_input"), take("lora_weight"), at::Tensor(),
            at::Tensor()};
  }
};

}  // namespace

c10::ScalarType head_compute_dtype(const HeadProduct& product) {
  const compat::AutocastState autocast = compat::AutocastState::current();
  const bool cuda = product.hidden.is_cuda();
  if (cuda ? autocast.cuda_enabled : autocast.cpu_enabled) return cuda ? autocast.cuda_dtype : autocast.cpu_dtype;
  const c10::ScalarType weight = product.quantized != nullptr ? at::kFloat : product.weight.scalar_type();
  return at::promote_types(product.hidden.scalar_type(), weight);
}

at::Tensor chunked_cross_entropy_sum(const HeadProduct& product, const at::Tensor& targets, int64_t chunk_tokens) {
  HPCTRAIN_CHECK(chunk_tokens > 0, "the chunked loss needs chunks of at least one token, got {}", chunk_tokens);
  const bool wanted = product.hidden.requires_grad() || (product.weight.defined() && product.weight.requires_grad()) ||
                      (product.lora_input.defined() && product.lora_input.requires_grad()) ||
                      (product.lora_weight.defined() && product.lora_weight.requires_grad());
  if (at::GradMode::is_enabled() && wanted) {
    const auto optional = [](const at::Tensor& t) { return t.defined() ? c10::optional<at::Tensor>(t) : c10::nullopt; };
    return LinearCrossEntropy::apply(product.hidden, optional(product.weight), product.quantized,
                                     optional(product.lora_input), optional(product.lora_weight), targets,
                                     chunk_tokens);
  }
  HeadGradients none;
  return run_chunks(product, targets, chunk_tokens, at::Tensor(), WantedGradients{}, none);
}

at::Tensor chunked_cross_entropy_per_target(const HeadProduct& product, const at::Tensor& targets, int64_t chunk_tokens) {
  HPCTRAIN_CHECK(chunk_tokens > 0, "the chunked loss needs chunks of at least one token, got {}", chunk_tokens);
  at::NoGradGuard no_grad;
  const c10::ScalarType accumulate = head_compute_dtype(product) == at::kDouble ? at::kDouble : at::kFloat;
  const at::Tensor per_target = at::empty({product.hidden.size(0)}, product.hidden.options().dtype(accumulate));
  HeadGradients none;
  (void)run_chunks(product, targets, chunk_tokens, per_target, WantedGradients{}, none);
  return per_target.to(at::kFloat);
}

}  // namespace hpctrain::models::detail
