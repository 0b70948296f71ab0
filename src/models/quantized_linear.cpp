// The 4-bit linear product and the module holding a layer's 4-bit tensors (quantized_linear.hpp, Note [Quantized
// base]).
#include "hpctrain/models/quantized_linear.hpp"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/autograd.h>

#include <algorithm>
#include <array>

#include "hpctrain/compat/autocast_state.hpp"
#include "hpctrain/core/error.hpp"
#include "models/fused_quant4.hpp"

namespace hpctrain::models {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Note [Dequantization buffer]
// Where the product is not fused (Note [Fused 4-bit product] in nf4_matmul_cpu.cpp: bfloat16 products, or a CPU
// without AVX-512), on the CPU every quantized layer dequantizes its weight into one buffer per thread and dtype, grown to the largest
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

// The fused float32 products (Note [Fused 4-bit product]): x Wᵀ (x [..., in] -> [..., out]) or, for the input
// gradient, dy W (dy [..., out] -> [..., in]).
at::Tensor fused_product(const at::Tensor& t, const Quant4Weight& w, bool input_gradient) {
  const detail::FusedQuant4Weight fused(w);
  const int64_t from = input_gradient ? fused.out_features() : fused.in_features();
  const int64_t to = input_gradient ? fused.in_features() : fused.out_features();
  const at::Tensor rows = t.to(at::kFloat).reshape({-1, from}).contiguous();
  std::vector<int64_t> shape = t.sizes().vec();
  shape.back() = to;
  at::Tensor out = at::empty({rows.size(0), to}, rows.options());
  if (input_gradient) fused.input_grad_out(rows, out);
  else fused.linear_out(rows, out);
  return out.view(shape);
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
    if (quant4_product_fused(x.device(), dtype)) {
      at::Tensor y = fused_product(x, *weight, /*input_gradient=*/false);
      return bias->defined() ? y.add_(*bias) : y;
    }
    return at::linear(x, dequantized(*weight, dtype), *bias);  // the dequantized weight is dead after this line
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const at::Tensor& grad = grad_outputs[0];
    const at::ScalarType dtype = static_cast<at::ScalarType>(ctx->saved_data["dtype"].toInt());
    const Quant4Weight weight = saved_weight(ctx);
    if (quant4_product_fused(grad.device(), dtype))
      return {fused_product(grad, weight, /*input_gradient=*/true), at::Tensor(), at::Tensor(), at::Tensor()};
    return {at::matmul(grad.to(dtype), dequantized(weight, dtype)), at::Tensor(), at::Tensor(), at::Tensor()};
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

bool quant4_product_fused(const c10::Device& device, at::ScalarType dtype) {
  return device.is_cpu() && dtype == at::kFloat && detail::quant4_fused_available();
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

std::shared_ptr<Quant4StateImpl> hold_4bit(torch::nn::Module& owner, at::Tensor& weight, const at::Tensor& out_in,
                                           const Quant4Options& options, const std::string& name) {
  const Quant4Weight quantized = quantize_4bit(out_in.to(at::kCPU), options, name + ".weight");
  auto state = owner.register_module(kQuant4Submodule, std::make_shared<Quant4StateImpl>(quantized));
  state->to(weight.device());
  weight.set_data(at::empty({0}, weight.options()));  // the full-precision weight is freed
  return state;
}

void restore_from_4bit(torch::nn::Module& owner, at::Tensor& weight, const Quant4Weight& quantized, bool transposed) {
  const at::Tensor out_in = dequantize_4bit(quantized, at::kFloat);
  weight.set_data((transposed ? out_in.t().contiguous() : out_in).to(weight.device(), weight.scalar_type()));
  owner.unregister_module(kQuant4Submodule);
}

namespace detail {
namespace {

// The operands of a fused product against the weight [out, in]: a [N, a_width] in, b [N, b_width] out, both float32
// and contiguous (else Error naming `what`). Returns whether there is work: not when N is 0, nor when a_width is
// (an empty sum: b is zeroed).
bool fused_operands(const char* what, const at::Tensor& a, int64_t a_width, at::Tensor& b, int64_t b_width,
                    int64_t out, int64_t in) {
  HPCTRAIN_CHECK(a.scalar_type() == at::kFloat && b.scalar_type() == at::kFloat && a.is_contiguous() &&
                     b.is_contiguous() && a.dim() == 2 && a.size(1) == a_width && b.dim() == 2 &&
                     b.size(0) == a.size(0) && b.size(1) == b_width,
                 "the fused 4-bit {}: {} and {} for a weight [{}, {}]", what, c10::str(a.sizes()), c10::str(b.sizes()),
                 out, in);
  if (a.size(0) == 0) return false;
  if (a_width == 0) {
    b.zero_();
    return false;
  }
  return true;
}

}  // namespace

FusedQuant4Weight::FusedQuant4Weight(const Quant4Weight& w)
    : w_(w), absmax_(block_absmax(w).contiguous()), args_(quant4_cpu_args(w_, absmax_, at::kFloat)) {
  HPCTRAIN_CHECK(w.shape.size() == 2 && w.codes.is_cpu(), "the fused 4-bit product needs a 2-D weight on the CPU");
}

// Up to quant4_fused_tokens() rows of x transposed at a time, the weight's rows shared out among the threads.
void FusedQuant4Weight::linear_out(const at::Tensor& x, at::Tensor& y) const {
  const int64_t out = out_features(), in = in_features(), tokens = x.size(0);
  if (!fused_operands("product", x, in, y, out, out, in)) return;
  const int64_t pass = quant4_fused_tokens();
  at::Tensor packed = at::empty({in * ((std::min(pass, tokens) + 31) / 32 * 32)}, x.options());
  for (int64_t t0 = 0; t0 < tokens; t0 += pass) {
    const int64_t count = std::min(pass, tokens - t0), stride = (count + 31) / 32 * 32;
    quant4_pack_tokens(x.data_ptr<float>() + t0 * in, count, in, packed.data_ptr<float>(), stride);
    at::parallel_for(0, out, 96, [&](int64_t first, int64_t last) {
      quant4_matmul_xwt(args_, in, packed.data_ptr<float>(), stride, count, y.data_ptr<float>() + t0 * out, out,
                        first, last);
    });
  }
}

// The weight's columns shared out among the threads.
void FusedQuant4Weight::input_grad_out(const at::Tensor& dy, at::Tensor& dx) const {
  const int64_t out = out_features(), in = in_features(), tokens = dy.size(0);
  if (!fused_operands("input gradient", dy, out, dx, in, out, in)) return;
  at::parallel_for(0, in, 128, [&](int64_t first, int64_t last) {
    quant4_matmul_xw(args_, out, in, dy.data_ptr<float>(), tokens, dx.data_ptr<float>(), first, last);
  });
}

}  // namespace detail

}  // namespace hpctrain::models
