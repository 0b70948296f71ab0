// The CPU loop of 4-bit dequantization (nf4_kernel.hpp, Note [4-bit rounding] in models/nf4.hpp): a scalar loop, and
// an AVX-512 one chosen at run time where the CPU has it. Both compute fl(values[code] · absmax) per element with the
// one float32 multiply, and round to bfloat16 to nearest even: their outputs are bit-identical (unit.models checks
// both against bitsandbytes' goldens).
#include "models/nf4_kernel.hpp"

#include <algorithm>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define HPCTRAIN_QUANT4_AVX512 1
#else
#define HPCTRAIN_QUANT4_AVX512 0
#endif

namespace hpctrain::models::detail {
namespace {

// Elements [first, last) into out[0, last - first).
template <typename Out, typename Convert>
void quant4_scalar_range(const unsigned char* codes, const float* absmax, const float* values16, int64_t blocksize,
                         int64_t first, int64_t last, Out* out, Convert convert) {
  for (int64_t i = first; i < last;) {
    const int64_t block = i / blocksize;
    const float scale = absmax[block];
    const int64_t end = std::min(last, (block + 1) * blocksize);
    for (; i < end; ++i) out[i - first] = convert(quant4_element(codes, values16, scale, i));
  }
}

#if HPCTRAIN_QUANT4_AVX512
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC 12's false alarm on _mm512_undefined_* in the intrinsics
// 32 elements from 16 bytes of codes (element 2k: byte k's high nibble, 2k + 1: its low one): two vectors of 16
// values, each fl(values[code] · scale).
__attribute__((target("avx512f"))) inline void quant4_decode32(const unsigned char* bytes, __m512 lut, __m512 scale,
                                                         __m512* lo, __m512* hi) {
  const __m512i b = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(bytes)));
  const __m512i high = _mm512_srli_epi32(b, 4), low = _mm512_and_si512(b, _mm512_set1_epi32(0x0F));
  const __m512i first = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
  const __m512i second = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
  *lo = _mm512_mul_ps(_mm512_permutexvar_ps(_mm512_permutex2var_epi32(high, first, low), lut), scale);
  *hi = _mm512_mul_ps(_mm512_permutexvar_ps(_mm512_permutex2var_epi32(high, second, low), lut), scale);
}

// quant4_to_bf16 on 16 lanes: to nearest even, a NaN made 0x7FC0.
__attribute__((target("avx512f"))) inline __m256i quant4_bf16x16(__m512 v) {
  const __m512i bits = _mm512_castps_si512(v);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(1));
  __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(bits, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7FFF))), 16);
  const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
  rounded = _mm512_mask_mov_epi32(rounded, nan, _mm512_set1_epi32(0x7FC0));
  return _mm512_cvtepi32_epi16(rounded);
}

// Elements [first, last): groups of 32 that start at a multiple of 32 (block sizes are powers of two >= 32, so a
// group lies in one block) go through the vector path, the rest through the scalar one.
__attribute__((target("avx512f"))) void quant4_avx512_range(const unsigned char* codes, const float* absmax,
                                                            const float* values16, int64_t blocksize, int64_t first,
                                                            int64_t last, void* out, bool bf16) {
  const __m512 lut = _mm512_loadu_ps(values16);
  const int64_t vector_first = std::min(last, (first + 31) / 32 * 32), vector_last = std::max(vector_first, last / 32 * 32);
  auto* f32 = static_cast<float*>(out) - first;  // element i at f32[i]
  auto* b16 = static_cast<std::uint16_t*>(out) - first;
  auto scalar = [&](int64_t a, int64_t b) {
    if (bf16) quant4_scalar_range(codes, absmax, values16, blocksize, a, b, b16 + a, quant4_to_bf16);
    else quant4_scalar_range(codes, absmax, values16, blocksize, a, b, f32 + a, [](float v) { return v; });
  };
  scalar(first, vector_first);
  for (int64_t i = vector_first; i < vector_last; i += 32) {
    __m512 lo, hi;
    quant4_decode32(codes + i / 2, lut, _mm512_set1_ps(absmax[i / blocksize]), &lo, &hi);
    if (bf16) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(b16 + i), quant4_bf16x16(lo));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(b16 + i + 16), quant4_bf16x16(hi));
    } else {
      _mm512_storeu_ps(f32 + i, lo);
      _mm512_storeu_ps(f32 + i + 16, hi);
    }
  }
  scalar(vector_last, last);
}

// quant4_dequantize_rows in float32 where every row's range is whole groups of 32 (see there).
__attribute__((target("avx512f"))) void quant4_avx512_rows(const Quant4CpuArgs& a, int64_t in_features, int64_t row,
                                                           int64_t count, int64_t col, int64_t width, float* out,
                                                           int64_t ldo) {
  const __m512 lut = _mm512_loadu_ps(a.values16);
  for (int64_t r = 0; r < count; ++r) {
    const int64_t first = (row + r) * in_features + col;
    for (int64_t i = 0; i < width; i += 32) {
      __m512 lo, hi;
      quant4_decode32(a.codes + (first + i) / 2, lut, _mm512_set1_ps(a.absmax[(first + i) / a.blocksize]), &lo, &hi);
      _mm512_storeu_ps(out + r * ldo + i, lo);
      _mm512_storeu_ps(out + r * ldo + i + 16, hi);
    }
  }
}

#pragma GCC diagnostic pop

bool quant4_cpu_has_avx512() {
  static const bool yes = __builtin_cpu_supports("avx512f");
  return yes;
}
#endif

}  // namespace

void quant4_dequantize_range(const Quant4CpuArgs& a, int64_t first, int64_t last, void* out, bool vectorized) {
  if (first >= last) return;
#if HPCTRAIN_QUANT4_AVX512
  if (vectorized && a.blocksize >= 32 && quant4_cpu_has_avx512()) {
    quant4_avx512_range(a.codes, a.absmax, a.values16, a.blocksize, first, last, out, a.bf16);
    return;
  }
#endif
  (void)vectorized;
  if (a.bf16)
    quant4_scalar_range(a.codes, a.absmax, a.values16, a.blocksize, first, last, static_cast<std::uint16_t*>(out),
                        quant4_to_bf16);
  else
    quant4_scalar_range(a.codes, a.absmax, a.values16, a.blocksize, first, last, static_cast<float*>(out),
                        [](float v) { return v; });
}

void quant4_dequantize_rows(const Quant4CpuArgs& a, int64_t in_features, int64_t row, int64_t count, int64_t col,
                            int64_t width, float* out, int64_t ldo) {
#if HPCTRAIN_QUANT4_AVX512
  if (!a.bf16 && a.blocksize >= 32 && in_features % 32 == 0 && col % 32 == 0 && width % 32 == 0 &&
      quant4_cpu_has_avx512()) {
    quant4_avx512_rows(a, in_features, row, count, col, width, out, ldo);
    return;
  }
#endif
  for (int64_t r = 0; r < count; ++r) {
    const int64_t first = (row + r) * in_features + col;
    quant4_dequantize_range(a, first, first + width, out + r * ldo);
  }
}

bool quant4_vectorized_available() {
#if HPCTRAIN_QUANT4_AVX512
  return quant4_cpu_has_avx512();
#else
  return false;
#endif
}

}  // namespace hpctrain::models::detail
