// The dequantization of one element of a 4-bit weight (Note [4-bit rounding] in models/nf4.hpp), shared by the CPU
// loop (nf4.cpp), the CUDA kernel (nf4_cuda.cu) and its CPU test (tests/cuda_logic). Plain C++: no LibTorch, no
// CUDA headers. Internal to src/models.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define HPCTRAIN_QUANT4_HOST_DEVICE __host__ __device__
#else
#define HPCTRAIN_QUANT4_HOST_DEVICE
#endif

namespace hpctrain::models::detail {

// The code of element i: the high nibble of byte i / 2 for an even i, the low one for an odd i.
HPCTRAIN_QUANT4_HOST_DEVICE inline unsigned quant4_code(const unsigned char* codes, int64_t i) {
  const unsigned byte = codes[i >> 1];
  return (i & 1) != 0 ? byte & 0x0Fu : byte >> 4;
}

// The absmax of block `block` of a nested weight: fl(map[absmax_codes[block]] * absmax2[block / 256]) + offset,
// each operation rounded to float32 (bitsandbytes' dequantize_blockwise, then `absmax += offset`).
HPCTRAIN_QUANT4_HOST_DEVICE inline float nested_absmax(const float* dynamic_map, const unsigned char* absmax_codes,
                                                       const float* absmax2, float offset, int64_t block) {
  const float scaled = dynamic_map[absmax_codes[block]] * absmax2[block / 256];
  return scaled + offset;
}

// Element i of the weight in float32: fl(values[code] * absmax).
HPCTRAIN_QUANT4_HOST_DEVICE inline float quant4_element(const unsigned char* codes, const float* values16, float absmax,
                                                        int64_t i) {
  return values16[quant4_code(codes, i)] * absmax;
}

// float32 to bfloat16 bits, to nearest even (core/float_bits.hpp's f32_to_bf16, NaN made quiet).
HPCTRAIN_QUANT4_HOST_DEVICE inline std::uint16_t quant4_to_bf16(float value) {
#if defined(__CUDA_ARCH__)
  const std::uint32_t bits = __float_as_uint(value);
#else
  std::uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
#endif
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u) return 0x7FC0u;
  return static_cast<std::uint16_t>((bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16);
}

// One CPU dequantization (nf4_dequantize_cpu.cpp), into float32 or bfloat16 bits.
struct Quant4CpuArgs {
  const unsigned char* codes = nullptr;
  const float* absmax = nullptr;    // float32 per block (already dequantized when nested)
  const float* values16 = nullptr;  // the type's 16 values
  int64_t blocksize = 64;
  bool bf16 = false;
};

// Elements [first, last) of the weight (flat order) into out[0, last - first): with `vectorized`, through AVX-512
// where the CPU has it (bit-identical to the scalar loop, which the rest takes).
void quant4_dequantize_range(const Quant4CpuArgs& a, int64_t first, int64_t last, void* out, bool vectorized = true);
// Rows [row, row + count) of a weight of in_features columns, columns [col, col + width), into float32 out (row stride
// ldo): quant4_dequantize_range row by row, with one call for the whole slice (the fused products' slices are a few
// groups of 32 per row, where a call per row cost more than the row).
void quant4_dequantize_rows(const Quant4CpuArgs& a, int64_t in_features, int64_t row, int64_t count, int64_t col,
                            int64_t width, float* out, int64_t ldo);
// Whether quant4_dequantize_range's vector path runs on this CPU.
[[nodiscard]] bool quant4_vectorized_available();

// The float32 products of a 4-bit weight W [out_features, in_features] on the CPU without W in full precision
// (nf4_matmul_cpu.cpp, Note [Fused 4-bit product]); AVX-512 only: the caller checks quant4_fused_available(). `w`
// must not be bf16. Row-major arrays throughout.
[[nodiscard]] bool quant4_fused_available();
// The forward's tokens per pass: quant4_pack_tokens takes at most this many.
[[nodiscard]] int64_t quant4_fused_tokens();
// x [tokens, in_features] transposed into xt (in_features * stride floats) in blocks of 32 tokens: token t's feature k
// at xt[(t / 32) * in_features * 32 + k * 32 + t % 32], the tokens from `tokens` on zeroed; stride is `tokens` rounded
// up to a multiple of 32.
void quant4_pack_tokens(const float* x, int64_t tokens, int64_t in_features, float* xt, int64_t stride);
// y[t, n] = sum_k x[t, k] W[n, k] for n in [row_first, row_last), t < tokens (y's row stride ldy), from
// quant4_pack_tokens' xt.
void quant4_matmul_xwt(const Quant4CpuArgs& w, int64_t in_features, const float* xt, int64_t stride, int64_t tokens,
                       float* y, int64_t ldy, int64_t row_first, int64_t row_last);
// dx[t, k] = sum_n dy[t, n] W[n, k] for k in [col_first, col_last), t < tokens (dy [tokens, out_features],
// dx [tokens, in_features]).
void quant4_matmul_xw(const Quant4CpuArgs& w, int64_t out_features, int64_t in_features, const float* dy,
                      int64_t tokens, float* dx, int64_t col_first, int64_t col_last);

// The device arrays of one dequantization (nf4_cuda.cu): out[i] for i < numel, in float32 or bfloat16 bits.
struct Quant4CudaArgs {
  const unsigned char* codes = nullptr;
  const float* absmax = nullptr;              // float32 per block (already dequantized when nested)
  const float* values16 = nullptr;            // the type's 16 values (device memory)
  void* out = nullptr;
  int64_t numel = 0, blocksize = 64;
  bool bf16 = false;
};

// The nested absmax of every block into `absmax_out` (device memory, `blocks` floats).
struct NestedAbsmaxCudaArgs {
  const float* dynamic_map = nullptr;        // 256 values (device memory)
  const unsigned char* absmax_codes = nullptr;
  const float* absmax2 = nullptr;
  const float* offset = nullptr;             // one value (device memory)
  float* absmax_out = nullptr;
  int64_t blocks = 0;
};

// Queue the kernels on `stream` (a cudaStream_t); each returns null, or the launch's CUDA error text. Only built
// with -DHPCTRAIN_WITH_CUDA=ON.
const char* quant4_nested_absmax_cuda(const NestedAbsmaxCudaArgs& args, void* stream);
const char* quant4_dequantize_cuda(const Quant4CudaArgs& args, void* stream);

}  // namespace hpctrain::models::detail
