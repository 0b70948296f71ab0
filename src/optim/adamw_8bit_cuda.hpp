// 8-bit AdamW on a CUDA device (Note [8-bit AdamW on CUDA] in adamw_8bit_cuda.cu): one launch per parameter over
// raw device arrays. Plain C++ (no LibTorch, no CUDA headers), so both the nvcc-compiled kernel file and
// adamw_8bit.cpp include it. Only built with -DHPCTRAIN_WITH_CUDA=ON. Internal to src/optim.
#pragma once

#include <cstdint>

namespace hpctrain::optim::detail {

// The device copy of both quantization maps and their thresholds (Note [Quantizer thresholds]), as one float
// array of kCudaMapFloats: signed code[256], unsigned code[256], signed thresholds[259], unsigned thresholds[259].
inline constexpr int kCudaMapFloats = 256 + 256 + 259 + 259;

// The step's scalars, rounded to float32 on the host as the CPU loop rounds them (adamw_kernel.cpp).
struct AdamW8bitCudaScalars {
  float decay, beta1, one_minus_beta1, beta2, one_minus_beta2, correction, eps, neg_step;
};

// One parameter of n float32 elements; all pointers are device memory of one GPU. Quantized state: codes and one
// absmax per 256 elements; float32 state (a small parameter): exp_avg/exp_avg_sq as floats and absmax null.
struct AdamW8bitCudaArgs {
  float* param = nullptr;
  const float* grad = nullptr;
  void* exp_avg = nullptr;  // uint8 codes or float32 values
  void* exp_avg_sq = nullptr;
  float* exp_avg_absmax = nullptr;
  float* exp_avg_sq_absmax = nullptr;
  const float* maps = nullptr;  // kCudaMapFloats
  int64_t n = 0;
  AdamW8bitCudaScalars scalars{};
};

#if defined(__CUDACC__)
#define HPCTRAIN_HOST_DEVICE __host__ __device__
#else
#define HPCTRAIN_HOST_DEVICE
#endif

// The kernel's requantization lookup, also compiled for the host so that a CPU test checks it against
// quant::Quantizer::nearest (tests/cuda_logic): the number of thresholds[1..255] at or below y, by binary search
// (thresholds ascending, +inf for indices no float reaches; NaN compares false: index 0).
HPCTRAIN_HOST_DEVICE inline unsigned char nearest_by_thresholds(const float* thresholds, float y) {
  int low = 0, high = 255;
  while (low < high) {
    const int mid = (low + high + 1) / 2;
    if (y >= thresholds[mid]) low = mid;
    else high = mid - 1;
  }
  return static_cast<unsigned char>(low);
}

// y clamped to a map's range [code[0], code[255]] (NaN stays NaN), as Quantizer::clamp.
HPCTRAIN_HOST_DEVICE inline float clamp_to_map(const float* code, float y) {
  return y < code[0] ? code[0] : code[255] < y ? code[255] : y;
}

// Queues the update on `stream` (a cudaStream_t); returns null, or the launch's CUDA error text.
const char* adamw_8bit_cuda_update(const AdamW8bitCudaArgs& args, void* stream);

}  // namespace hpctrain::optim::detail
