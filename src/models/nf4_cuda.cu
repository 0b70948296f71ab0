// 4-bit dequantization kernels (nf4_kernel.hpp, Note [4-bit rounding] in models/nf4.hpp), compiled by nvcc in
// hpctrain_cuda_kernels (CMakeLists.txt, -fmad=false: each product rounded on its own, as on the CPU).
#include "nf4_kernel.hpp"

#include <cuda_runtime.h>

namespace hpctrain::models::detail {
namespace {

constexpr int kThreads = 256;

__global__ void nested_absmax_kernel(NestedAbsmaxCudaArgs a) {
  const int64_t block = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (block >= a.blocks) return;
  a.absmax_out[block] = nested_absmax(a.dynamic_map, a.absmax_codes, a.absmax2, *a.offset, block);
}

// One thread per element: its byte's nibble, times its block's absmax.
__global__ void dequantize_kernel(Quant4CudaArgs a) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (i >= a.numel) return;
  const float value = quant4_element(a.codes, a.values16, a.absmax[i / a.blocksize], i);
  if (a.bf16) {
    static_cast<std::uint16_t*>(a.out)[i] = quant4_to_bf16(value);
  } else {
    static_cast<float*>(a.out)[i] = value;
  }
}

unsigned grid_of(int64_t n) { return static_cast<unsigned>((n + kThreads - 1) / kThreads); }

const char* last_error() {
  const cudaError_t status = cudaGetLastError();
  return status == cudaSuccess ? nullptr : cudaGetErrorString(status);
}

}  // namespace

const char* quant4_nested_absmax_cuda(const NestedAbsmaxCudaArgs& args, void* stream) {
  if (args.blocks == 0) return nullptr;
  nested_absmax_kernel<<<grid_of(args.blocks), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(args);
  return last_error();
}

const char* quant4_dequantize_cuda(const Quant4CudaArgs& args, void* stream) {
  if (args.numel == 0) return nullptr;
  dequantize_kernel<<<grid_of(args.numel), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(args);
  return last_error();
}

}  // namespace hpctrain::models::detail
