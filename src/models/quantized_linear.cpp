// The 4-bit linear product and the module holding a layer's 4-bit tensors (quantized_linear.hpp, Note [Quantized
// base]).
#include "hpctrain/models/quantized_linear.hpp"

#include <ATen/ATen.h>
#include <torch/autograd.h>

#include <array>

#include "hpctrain/compat/autocast_state.hpp"
#include "hpctrain/core/error.hpp"

namespace hpctrain::models {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Note [Dequantization buffer]
// On the CPU every quantized layer dequantizes its weight into one buffer per thread and dtype, grown to the largest
// weight and then reused, rather than into a fresh tensor per product: the weight is dead once its product returns
// (the autograd Function saves only the 4-bit tensors), and a fresh weight-sized allocation per layer, freed between
// activations that stay alive, fragments the heap (with the tuned thresholds of Note [Host allocator] the resident set
// of a QLoRA step grew with the tokens, about 1.3-1.6x a LoRA step's per token, while the live tensors did not). So
// one full-precision weight stays resident per thread that multiplies (the forward's and, on the CPU the same thread,
// the backward's): estimate-memory's "dequantized weight (largest)" row. On CUDA the caching allocator does this.
at::Tensor dequantized(const Quant4Weight& w, at::ScalarType dtype) {
  if (dtype != at::kFloat && dtype != at::kBFloat16) return dequantize_4bit(w, at::kFloat).to(dtype);
  if (!w.codes.is_cpu()) return dequantize_4bit(w, dtype);
  thread_local std::array<at::Tensor, 2> buffers;  // float32, bfloat16
  at::Tensor& buffer = buffers[dtype == at::kFloat ? 0 : 1];
  const int64_t n = w.numel();
  if (!buffer.defined() || buffer.numel() < n) {
    buffer = at::Tensor();  // the smaller one goes first
    buffer = at::empty({n}, at::TensorOptions().dtype(dtype));
  }
  at::Tensor weight = buffer.narrow(0, 0, n).view(w.shape);
  dequantize_4bit_out(w, weight);
  return weight;
}

// The 4-bit tensors travel through the autograd context as saved data (they need no version tracking: frozen).
void save_weight(AutogradContext* ctx, const Quant4Weight& w, at::ScalarType dtype) {
  ctx->saved_data["codes"] = w.codes;
  ctx->saved_data["absmax"] = w.absmax;
  ctx->saved_data["nested"] = w.nested();
  if (w.nested()) ctx->saved_data["absmax2"] = w.absmax2, ctx->saved_data["offset"] = w.offset;
  ctx->saved_data["shape"] = w.shape;
  ctx->saved_data["type"] = static_cast<int64_t>(w.options.type);
  ctx->saved_data["blocksize"] = w.options.blocksize;
  ctx->saved_data["dtype"] = static_cast<int64_t>(dtype);
}

Quant4Weight saved_weight(AutogradContext* ctx) {
  Quant4Weight w;
  w.codes = ctx->saved_data["codes"].toTensor();
  w.absmax = ctx->saved_data["absmax"].toTensor();
  w.options.double_quant = ctx->saved_data["nested"].toBool();
  if (w.options.double_quant) w.absmax2 = ctx->saved_data["absmax2"].toTensor(), w.offset = ctx->saved_data["offset"].toTensor();
  w.shape = ctx->saved_data["shape"].toIntVector();
  w.options.type = static_cast<Quant4Type>(ctx->saved_data["type"].toInt());
  w.options.blocksize = ctx->saved_data["blocksize"].toInt();
  return w;
}

class QuantizedLinearFunction : public torch::autograd::Function<QuantizedLinearFunction> {
 public:
  // The bias comes as a pointer, not a differentiable input: it is frozen with the weight, and may be undefined.
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor* bias, const Quant4Weight* weight,
                            at::ScalarType dtype) {
    save_weight(ctx, *weight, dtype);
    return at::linear(x, dequantized(*weight, dtype), *bias);  // the dequantized weight is dead after this line
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const at::Tensor& grad = grad_outputs[0];
    const at::ScalarType dtype = static_cast<at::ScalarType>(ctx->saved_data["dtype"].toInt());
    const at::Tensor w = dequantized(saved_weight(ctx), dtype);
    return {at::matmul(grad.to(dtype), w), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor quantized_linear(const at::Tensor& x, const Quant4Weight& weight, const at::Tensor& bias) {
  HPCTRAIN_CHECK(weight.shape.size() == 2 && x.dim() >= 1 && x.size(-1) == weight.shape[1],
                 "quantized_linear: input of {} features for a 4-bit weight of shape [{}, {}]", x.dim() >= 1 ? x.size(-1) : 0,
                 weight.shape.empty() ? 0 : weight.shape[0], weight.shape.size() > 1 ? weight.shape[1] : 0);
  HPCTRAIN_CHECK(!bias.defined() || !bias.requires_grad(), "quantized_linear: the bias of a 4-bit layer must be frozen");
  return QuantizedLinearFunction::apply(x, &bias, &weight, quant4_product_dtype(x.device(), x.scalar_type()));
}

at::ScalarType quant4_product_dtype(const c10::Device& device, at::ScalarType otherwise) {
  const compat::AutocastState autocast = compat::AutocastState::current();
  if (device.is_cpu() && autocast.cpu_enabled) return autocast.cpu_dtype;
  if (device.is_cuda() && autocast.cuda_enabled) return autocast.cuda_dtype;
  return otherwise;
}

Quant4StateImpl::Quant4StateImpl(const Quant4Weight& weight) : shape_(weight.shape), options_(weight.options) {
  codes_ = register_buffer("codes", weight.codes);
  absmax_ = register_buffer("absmax", weight.absmax);
  if (weight.nested()) {
    absmax2_ = register_buffer("absmax2", weight.absmax2);
    offset_ = register_buffer("offset", weight.offset);
  }
}

Quant4Weight Quant4StateImpl::weight() const {
  Quant4Weight w;
  w.codes = codes_, w.absmax = absmax_, w.absmax2 = absmax2_, w.offset = offset_;
  w.shape = shape_, w.options = options_;
  return w;
}

void Quant4StateImpl::to(torch::Device device, torch::Dtype /*dtype*/, bool non_blocking) { to(device, non_blocking); }
void Quant4StateImpl::to(torch::Dtype /*dtype*/, bool /*non_blocking*/) {}
void Quant4StateImpl::to(torch::Device device, bool non_blocking) { torch::nn::Module::to(device, non_blocking); }

}  // namespace hpctrain::models
