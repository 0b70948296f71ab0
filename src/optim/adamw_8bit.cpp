// AdamW8bit (adamw_8bit.hpp): the fused blockwise dequantize-update-requantize loop over 8-bit moments.
#include "hpctrain/optim/adamw_8bit.hpp"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <utility>

#include "adamw_kernel.hpp"
#include "hpctrain/core/error.hpp"
#include "hpctrain/optim/blockwise_quant.hpp"

#if HPCTRAIN_WITH_CUDA
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "adamw_8bit_cuda.hpp"
#endif

namespace hpctrain::optim {

// Note [Fused 8-bit AdamW]
// bitsandbytes' 8-bit AdamW dequantizes both moments of a whole tensor, updates in float32 and
// requantizes the whole tensor: three passes over memory and two float32 temporaries of the tensor's size.
// Here each block of 256 elements is dequantized into two float32 arrays on the stack, updated by the
// very loop of the float32 AdamW (detail::adamw_update, Note [Fused AdamW]: same formula, same rounding,
// parameter updated from the unrounded new moments as bitsandbytes does), and requantized with a fresh
// absmax: parameter, gradient and the 8-bit state are read and written once. Blocks are independent, so
// at::parallel_for splits a parameter by whole blocks and the result is bitwise the same for any thread
// count (tests/optim/adamw_8bit_test.cpp). The only difference from an exact float32 AdamW is the
// rounding of each moment to its block's map, bounded by half the gap between neighbouring map values
// times absmax (the unit test derives that bound); bitsandbytes' own goldens: tests/optim/bnb_golden_test.cpp.
namespace {

struct QuantizedMoments {
  std::uint8_t* exp_avg;
  float* exp_avg_absmax;
  std::uint8_t* exp_avg_sq;
  float* exp_avg_sq_absmax;
};

// Blocks [first_block, last_block) of a parameter of n elements.
void update_blocks(float* param, const float* grad, const QuantizedMoments& q, int64_t n, int64_t first_block,
                   int64_t last_block, const detail::AdamWScalars& scalars) {
  const quant::Quantizer& signed_map = quant::signed_dynamic();
  const quant::Quantizer& unsigned_map = quant::unsigned_dynamic();
  float m[quant::kBlockSize], v[quant::kBlockSize];
  for (int64_t block = first_block; block < last_block; ++block) {
    const int64_t first = block * quant::kBlockSize;
    const int64_t len = std::min(quant::kBlockSize, n - first);
    quant::dequantize_block(signed_map, q.exp_avg + first, q.exp_avg_absmax[block], len, m);
    quant::dequantize_block(unsigned_map, q.exp_avg_sq + first, q.exp_avg_sq_absmax[block], len, v);
    detail::adamw_update(param + first, m, v, grad + first, len, scalars);
    q.exp_avg_absmax[block] = quant::quantize_block(signed_map, m, len, q.exp_avg + first);
    q.exp_avg_sq_absmax[block] = quant::quantize_block(unsigned_map, v, len, q.exp_avg_sq + first);
  }
}

constexpr int64_t kBlocksPerTask = 64;  // 16,384 elements: enough work per thread to pay for the split

#if HPCTRAIN_WITH_CUDA
constexpr bool kCudaKernel = true;
constexpr const char* kDevices = "CPU or a CUDA device";
#else
constexpr bool kCudaKernel = false;
constexpr const char* kDevices = "CPU (a CUDA device needs a build with -DHPCTRAIN_WITH_CUDA=ON)";
#endif

void check_parameter(const std::string& name, const at::Tensor& param) {
  HPCTRAIN_CHECK((param.is_cpu() || (kCudaKernel && param.is_cuda())) && param.scalar_type() == at::kFloat &&
                     param.is_contiguous(),
                 "--optim adamw_bnb_8bit: parameter '{}' is {} {}{}; expected a contiguous float32 tensor on the {}", name,
                 param.device().str(), c10::toString(param.scalar_type()), param.is_contiguous() ? "" : " (strided)",
                 kDevices);
}

}  // namespace

AdamW8bit::AdamW8bit(std::vector<ParameterGroup> groups, AdamW8bitOptions options)
    : AdamW8bit(std::move(groups), options, {}) {}

AdamW8bit::AdamW8bit(std::vector<ParameterGroup> groups, AdamW8bitOptions options, const std::vector<int64_t>& full_numels)
    : Optimizer(std::move(groups)), options_(options) {
  HPCTRAIN_CHECK(full_numels.empty() || full_numels.size() == parameters().size(),
                 "8-bit AdamW: {} whole-parameter sizes for {} tensors", full_numels.size(), parameters().size());
  for (std::size_t i = 0; i < parameters().size(); ++i) {
    const Parameter& p = parameters()[i];
    check_parameter(p.name, p.tensor);
    Slot slot;
    slot.name = p.name;
    slot.param = p.tensor;
    slot.weight_decay = p.weight_decay;
    const bool quantized = (full_numels.empty() ? p.tensor.numel() : full_numels[i]) >= options_.min_8bit_size;
    const at::ScalarType dtype = quantized ? at::kByte : at::kFloat;
    // Zero codes with absmax 0 dequantize to 0, as bitsandbytes initializes its state.
    slot.exp_avg = at::zeros(p.tensor.sizes(), p.tensor.options().dtype(dtype));
    slot.exp_avg_sq = at::zeros(p.tensor.sizes(), p.tensor.options().dtype(dtype));
    if (quantized) {
      slot.exp_avg_absmax = at::zeros({quant::block_count(p.tensor.numel())}, p.tensor.options());
      slot.exp_avg_sq_absmax = at::zeros({quant::block_count(p.tensor.numel())}, p.tensor.options());
    }
    slots_.push_back(std::move(slot));
  }
}

nlohmann::json AdamW8bit::hyperparameters() const {
  return {{"betas", {options_.beta1, options_.beta2}},
          {"eps", options_.eps},
          {"block_size", quant::kBlockSize},
          {"min_8bit_size", options_.min_8bit_size}};
}

int64_t AdamW8bit::state_bytes_for(int64_t numel, const AdamW8bitOptions& options) {
  if (numel < options.min_8bit_size) return 2 * numel * static_cast<int64_t>(sizeof(float));
  return 2 * (numel + quant::block_count(numel) * static_cast<int64_t>(sizeof(float)));
}

void AdamW8bit::update(double lr) {
  detail::AdamWScalars scalars = detail::adamw_scalars(options_.beta1, options_.beta2, options_.eps, steps(), lr);
  for (Slot& slot : slots_) {
    if (!slot.param.grad().defined()) continue;
    const at::Tensor grad = slot.param.grad().to(at::kFloat).contiguous();
    if (slot.param.is_cuda()) {
      update_on_cuda(slot, grad, lr);
      continue;
    }
    scalars.decay_factor = slot.weight_decay != 0.0 ? 1.0 - lr * slot.weight_decay : 1.0;
    float* param = slot.param.data_ptr<float>();
    const float* g = grad.data_ptr<float>();
    const int64_t n = slot.param.numel();
    if (!slot.quantized()) {  // under min_8bit_size: one float32 pass, no threads needed
      detail::adamw_update(param, slot.exp_avg.data_ptr<float>(), slot.exp_avg_sq.data_ptr<float>(), g, n, scalars);
      continue;
    }
    const QuantizedMoments q{slot.exp_avg.data_ptr<std::uint8_t>(), slot.exp_avg_absmax.data_ptr<float>(),
                             slot.exp_avg_sq.data_ptr<std::uint8_t>(), slot.exp_avg_sq_absmax.data_ptr<float>()};
    at::parallel_for(0, quant::block_count(n), kBlocksPerTask, [&](int64_t first, int64_t last) {
      update_blocks(param, g, q, n, first, last, scalars);
    });
  }
}

// Note [8-bit AdamW on CUDA] (adamw_8bit_cuda.cu): the kernel gets the scalars rounded as the CPU loop rounds them.
void AdamW8bit::update_on_cuda(Slot& slot, const at::Tensor& grad, double lr) {
#if HPCTRAIN_WITH_CUDA
  const c10::cuda::CUDAGuard guard(slot.param.device());
  if (!cuda_maps_.defined() || cuda_maps_.device() != slot.param.device()) {
    std::vector<float> maps;
    for (const quant::Quantizer* q : {&quant::signed_dynamic(), &quant::unsigned_dynamic()})
      maps.insert(maps.end(), q->code().begin(), q->code().end());
    for (const quant::Quantizer* q : {&quant::signed_dynamic(), &quant::unsigned_dynamic()})
      maps.insert(maps.end(), q->thresholds().begin(), q->thresholds().end());
    HPCTRAIN_CHECK(static_cast<int>(maps.size()) == detail::kCudaMapFloats, "8-bit AdamW: {} map values", maps.size());
    cuda_maps_ = at::tensor(maps).to(slot.param.device());
  }
  const detail::AdamWScalars s = detail::adamw_scalars(options_.beta1, options_.beta2, options_.eps, steps(), lr);
  detail::AdamW8bitCudaArgs args;
  args.param = slot.param.data_ptr<float>();
  args.grad = grad.data_ptr<float>();
  args.exp_avg = slot.exp_avg.data_ptr();
  args.exp_avg_sq = slot.exp_avg_sq.data_ptr();
  if (slot.quantized()) {
    args.exp_avg_absmax = slot.exp_avg_absmax.data_ptr<float>();
    args.exp_avg_sq_absmax = slot.exp_avg_sq_absmax.data_ptr<float>();
  }
  args.maps = cuda_maps_.data_ptr<float>();
  args.n = slot.param.numel();
  const double decay = slot.weight_decay != 0.0 ? 1.0 - lr * slot.weight_decay : 1.0;
  args.scalars = {static_cast<float>(decay), static_cast<float>(s.beta1), static_cast<float>(1.0 - s.beta1),
                  static_cast<float>(s.beta2), static_cast<float>(1.0 - s.beta2),
                  static_cast<float>(s.bias_correction2_sqrt), static_cast<float>(s.eps),
                  static_cast<float>(-s.step_size)};
  const char* error = detail::adamw_8bit_cuda_update(args, c10::cuda::getCurrentCUDAStream().stream());
  HPCTRAIN_CHECK(error == nullptr, "8-bit AdamW: the CUDA kernel for '{}' failed: {}", slot.name, error ? error : "");
#else
  (void)slot, (void)grad, (void)lr;
  fail("8-bit AdamW: a CUDA parameter in a build without -DHPCTRAIN_WITH_CUDA=ON");
#endif
}

OptimizerState AdamW8bit::state_tensors() const {
  OptimizerState state;
  for (const Slot& slot : slots_) {
    state["exp_avg." + slot.name] = slot.exp_avg;
    state["exp_avg_sq." + slot.name] = slot.exp_avg_sq;
    if (!slot.quantized()) continue;
    state["exp_avg_absmax." + slot.name] = slot.exp_avg_absmax;
    state["exp_avg_sq_absmax." + slot.name] = slot.exp_avg_sq_absmax;
  }
  return state;
}

}  // namespace hpctrain::optim
