// 8-bit AdamW kernels (adamw_8bit_cuda.hpp), compiled by nvcc with -fmad=false (CMakeLists.txt).
#include "adamw_8bit_cuda.hpp"

#include <cuda_runtime.h>

// Note [8-bit AdamW on CUDA]
// The GPU version of Note [Fused 8-bit AdamW] with the same arithmetic, so that it can be compared with the CPU
// implementation element for element: one thread block per quantization block of 256 elements, one thread per
// element. Each thread dequantizes its two moments (code[index] * absmax), runs the CPU loop's update with the
// same float32 operations in the same order, each rounded on its own (__fmul_rn and friends, and -fmad=false:
// no contraction into FMA, as -ffp-contract=off on the CPU), and updates the parameter from the unrounded new
// moments. The block's absmax is a shared-memory maximum of |m| with NaN left out (as block_absmax), and each
// moment is requantized to the nearest map value through the map's thresholds: nearest(y) is the number of
// thresholds at or below y (Note [Quantizer thresholds]), found here by a binary search over the 255 thresholds
// rather than the CPU's bucket table — the same index for every float, NaN included (index 0). A block of
// zeros keeps absmax 0 and the index of 0. Parameters smaller than min_8bit_size (float32 moments) take the
// same update without quantization.

namespace hpctrain::optim::detail {
namespace {

constexpr int kBlock = 256;  // quant::kBlockSize

struct DeviceMaps {
  const float* signed_code;
  const float* unsigned_code;
  const float* signed_thresholds;
  const float* unsigned_thresholds;
};

__device__ DeviceMaps maps_of(const float* maps) {
  return {maps, maps + 256, maps + 512, maps + 512 + 259};
}

// The CPU loop's element update (adamw_kernel.cpp), every operation rounded on its own.
__device__ void adamw_element(float& p, float& m, float& v, float g, const AdamW8bitCudaScalars& s) {
  m = __fadd_rn(__fmul_rn(m, s.beta1), __fmul_rn(s.one_minus_beta1, g));
  v = __fadd_rn(__fmul_rn(v, s.beta2), __fmul_rn(__fmul_rn(s.one_minus_beta2, g), g));
  const float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(v), s.correction), s.eps);
  p = __fadd_rn(__fmul_rn(p, s.decay), __fdiv_rn(__fmul_rn(s.neg_step, m), denom));
}

// max |x| over the block's threads, NaN left out (0 when all are NaN or zero); every thread gets it.
__device__ float block_absmax(float x, float* scratch) {
  const float magnitude = fabsf(x);
  scratch[threadIdx.x] = magnitude > 0.0f ? magnitude : 0.0f;  // NaN compares false: left out
  __syncthreads();
  for (int stride = kBlock / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) scratch[threadIdx.x] = fmaxf(scratch[threadIdx.x], scratch[threadIdx.x + stride]);
    __syncthreads();
  }
  const float absmax = scratch[0];
  __syncthreads();  // scratch is reused by the next call
  return absmax;
}

__device__ unsigned char requantize(const float* code, const float* thresholds, float x, float absmax) {
  const float y = absmax == 0.0f ? 0.0f : clamp_to_map(code, __fdiv_rn(x, absmax));
  return nearest_by_thresholds(thresholds, y);
}

__global__ void quantized_update(AdamW8bitCudaArgs a) {
  __shared__ float scratch[kBlock];
  const DeviceMaps maps = maps_of(a.maps);
  const int64_t block = blockIdx.x;
  const int64_t i = block * kBlock + threadIdx.x;
  const bool inside = i < a.n;
  auto* m_codes = static_cast<unsigned char*>(a.exp_avg);
  auto* v_codes = static_cast<unsigned char*>(a.exp_avg_sq);
  float m = 0.0f, v = 0.0f;
  if (inside) {
    m = __fmul_rn(maps.signed_code[m_codes[i]], a.exp_avg_absmax[block]);
    v = __fmul_rn(maps.unsigned_code[v_codes[i]], a.exp_avg_sq_absmax[block]);
    adamw_element(a.param[i], m, v, a.grad[i], a.scalars);
  }
  const float m_absmax = block_absmax(inside ? m : 0.0f, scratch);
  const float v_absmax = block_absmax(inside ? v : 0.0f, scratch);
  if (inside) {
    m_codes[i] = requantize(maps.signed_code, maps.signed_thresholds, m, m_absmax);
    v_codes[i] = requantize(maps.unsigned_code, maps.unsigned_thresholds, v, v_absmax);
  }
  if (threadIdx.x == 0) {
    a.exp_avg_absmax[block] = m_absmax;
    a.exp_avg_sq_absmax[block] = v_absmax;
  }
}

__global__ void dense_update(AdamW8bitCudaArgs a) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kBlock + threadIdx.x;
  if (i >= a.n) return;
  auto* m = static_cast<float*>(a.exp_avg);
  auto* v = static_cast<float*>(a.exp_avg_sq);
  adamw_element(a.param[i], m[i], v[i], a.grad[i], a.scalars);
}

}  // namespace

const char* adamw_8bit_cuda_update(const AdamW8bitCudaArgs& args, void* stream) {
  if (args.n == 0) return nullptr;
  const auto blocks = static_cast<unsigned>((args.n + kBlock - 1) / kBlock);
  auto* cuda_stream = static_cast<cudaStream_t>(stream);
  if (args.exp_avg_absmax != nullptr) {
    quantized_update<<<blocks, kBlock, 0, cuda_stream>>>(args);
  } else {
    dense_update<<<blocks, kBlock, 0, cuda_stream>>>(args);
  }
  const cudaError_t status = cudaGetLastError();
  return status == cudaSuccess ? nullptr : cudaGetErrorString(status);
}

}  // namespace hpctrain::optim::detail
