// The CPU's float32 products with a 4-bit weight that never hold the weight in full precision (nf4_kernel.hpp,
// Note [Fused 4-bit product]): an AVX-512 register tile fed by slices of the weight dequantized into the cache.
#include "models/nf4_kernel.hpp"

#include <algorithm>
#include <vector>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define HPCTRAIN_QUANT4_FUSED 1
#else
#define HPCTRAIN_QUANT4_FUSED 0
#endif

namespace hpctrain::models::detail {

// Note [Fused 4-bit product]
// A frozen 4-bit layer's two products, y = x W^T (forward) and dx = dy W (backward), run on the CPU in float32 as a
// blocked GEMM whose weight panels are dequantized straight into the cache, a slice at a time, instead of
// dequantizing the whole weight into memory and handing it to BLAS (which copies it again into its packed panels):
// on a QLoRA step at 128 tokens those two passes over the weight cost about a quarter of the products' time (perf:
// 11 % of the step in OpenBLAS' packing of the weight, 6 % in the dequantization). Each weight element is
// dequantized once per product by quant4_dequantize_rows (the same bits as dequantize_4bit); only the order of the
// float32 sums differs from at::linear over the dequantized weight (unit.models compares them). The register tile
// is kTileRows x 32 float32 accumulators (24 of the 32 vector registers): per step of the reduction it loads two
// vectors of the "column" operand and broadcasts kTileRows scalars of the "row" operand. Both operands are laid out
// so that a tile reads them in a few cache sets: rows kDepth floats apart, columns in blocks of 32 floats (a
// [depth][32] block per tile column). Read in place, dy's rows (a power of two of features apart, e.g. 4 KiB) all
// fell in one L1 set, and the backward of the MLP's down projection ran at two thirds of the forward's rate.
//  - backward: rows are tokens, columns are the weight's input features. For each slice of kDepth weight rows, dy's
//    columns of that slice are regrouped into [token][kDepth] (1 KiB per token), and each panel of kDepth rows x
//    kPanel columns is dequantized once, in column blocks of 32, and swept by every token; dx sums the slices in turn.
//  - forward: rows are the weight's output features (a strip of kStrip weight rows, dequantized kDepth columns at a
//    time), columns are tokens: x is first transposed into blocks of 32 tokens, [in][32] each (up to kTokensPerPass
//    tokens a pass), and each strip's y^T is transposed into y.
// While the tiles multiply one slice, the 4-bit codes and absmax of the next are prefetched (prefetch_slice): the
// codes of a slice are a few cache lines per weight row, which the hardware prefetchers do not fetch ahead.
// bench_fused_product (bench/qlora/run.sh, PARTS=kernel: 24 Llama-350M layers at 128 tokens, one thread) on an AMD
// EPYC VM: the backward's layouts took its products from 0.80-0.97 s to 0.75-0.79 s; the forward's stayed at
// 0.78-0.91 s (about 90 GFLOP/s, against the 117 of independent FMA chains on that core, which the bench prints).
// bfloat16 products, CUDA, and CPUs without AVX-512 keep dequantize-then-multiply (quantized_linear.cpp).
namespace {

constexpr int64_t kTileRows = 12;  // broadcast rows of the register tile
constexpr int64_t kTileCols = 32;  // its columns: two vectors of 16 float32
constexpr int64_t kDepth = 256;    // reduction elements per dequantized slice
constexpr int64_t kStrip = 96;     // forward: weight rows (output features) per strip
constexpr int64_t kPanel = 128;    // backward: weight columns (input features) per panel
constexpr int64_t kTokensPerPass = 256;  // forward: tokens transposed per pass

// Asks the cache for the 4-bit codes and absmax that quant4_dequantize_rows(w, in_features, row, count, col, width)
// will read: each row's codes are a few cache lines, one row length apart, which the hardware prefetchers do not
// fetch ahead; asked for while the tiles multiply the slice before, they are in the cache when dequantized.
void prefetch_lines(const void* data, int64_t first_byte, int64_t last_byte) {
  constexpr int64_t kLine = 64;
  const auto* bytes = static_cast<const char*>(data);
  for (int64_t byte = first_byte / kLine * kLine; byte < last_byte; byte += kLine)
    __builtin_prefetch(bytes + byte, 0, 3);
}

void prefetch_slice(const Quant4CpuArgs& w, int64_t in_features, int64_t row, int64_t count, int64_t col,
                    int64_t width) {
  for (int64_t r = 0; r < count; ++r) {
    const int64_t first = (row + r) * in_features + col, last = first + width;
    prefetch_lines(w.codes, first / 2, (last + 1) / 2);
    prefetch_lines(w.absmax, first / w.blocksize * 4, ((last - 1) / w.blocksize + 1) * 4);
  }
}

#if HPCTRAIN_QUANT4_FUSED
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC 12's false alarms on _mm512_undefined_* in the intrinsics
#pragma GCC diagnostic ignored "-Wuninitialized"

// C[r][0, 32) (+)= sum_p A[r * lda + p] * B[p * ldb + (0, 32)] for r < Rows; the lanes outside (m0, m1) are neither
// read from B and C nor written to C.
template <int Rows>
__attribute__((target("avx512f"))) void tile(int64_t depth, const float* a, int64_t lda, const float* b, int64_t ldb,
                                             float* c, int64_t ldc, bool accumulate, __mmask16 m0, __mmask16 m1) {
  // The accumulators must stay in registers: the loops over Rows are unrolled whole, which GCC 12 does not do on its
  // own even at -O3 (the accumulators then spill and the products ran at half speed).
  __m512 lo[Rows], hi[Rows];
#pragma GCC unroll 16
  for (int r = 0; r < Rows; ++r) {
    lo[r] = accumulate ? _mm512_maskz_loadu_ps(m0, c + r * ldc) : _mm512_setzero_ps();
    hi[r] = accumulate ? _mm512_maskz_loadu_ps(m1, c + r * ldc + 16) : _mm512_setzero_ps();
  }
  for (int64_t p = 0; p < depth; ++p) {
    const __m512 b0 = _mm512_maskz_loadu_ps(m0, b + p * ldb), b1 = _mm512_maskz_loadu_ps(m1, b + p * ldb + 16);
#pragma GCC unroll 16
    for (int r = 0; r < Rows; ++r) {
      const __m512 s = _mm512_set1_ps(a[r * lda + p]);
      lo[r] = _mm512_fmadd_ps(s, b0, lo[r]);
      hi[r] = _mm512_fmadd_ps(s, b1, hi[r]);
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < Rows; ++r) {
    _mm512_mask_storeu_ps(c + r * ldc, m0, lo[r]);
    _mm512_mask_storeu_ps(c + r * ldc + 16, m1, hi[r]);
  }
}

// dst[c * ldd + r] = src[r * lds + c] for r, c < 16: four rounds of shuffles over sixteen registers.
__attribute__((target("avx512f"))) void transpose16(const float* src, int64_t lds, float* dst, int64_t ldd) {
  __m512 r[16], t[16];
#pragma GCC unroll 16
  for (int i = 0; i < 16; ++i) r[i] = _mm512_loadu_ps(src + i * lds);
#pragma GCC unroll 8
  for (int i = 0; i < 16; i += 2) {  // pairs of rows interleaved
    t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
  }
#pragma GCC unroll 4
  for (int i = 0; i < 16; i += 4) {  // then pairs of pairs
    r[i] = _mm512_shuffle_ps(t[i], t[i + 2], 0x44);
    r[i + 1] = _mm512_shuffle_ps(t[i], t[i + 2], 0xEE);
    r[i + 2] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0x44);
    r[i + 3] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
  }
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) {  // 128-bit lanes, twice
    const int h = i < 4 ? i : i + 4;
    t[h] = _mm512_shuffle_f32x4(r[h], r[h + 4], 0x88);
    t[h + 4] = _mm512_shuffle_f32x4(r[h], r[h + 4], 0xDD);
  }
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) {
    r[i] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0x88);
    r[i + 8] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0xDD);
  }
#pragma GCC unroll 16
  for (int i = 0; i < 16; ++i) _mm512_storeu_ps(dst + i * ldd, r[i]);
}

#pragma GCC diagnostic pop

// tile<rows> for rows in [1, kTileRows], over `width` (1 to 32) columns.
void tile_any(int64_t rows, int64_t width, int64_t depth, const float* a, int64_t lda, const float* b, int64_t ldb,
              float* c, int64_t ldc, bool accumulate) {
  const auto mask = [](int64_t lanes) {
    return static_cast<__mmask16>(lanes >= 16 ? 0xFFFFu : lanes <= 0 ? 0u : (1u << lanes) - 1u);
  };
  const __mmask16 m0 = mask(width), m1 = mask(width - 16);
  switch (rows) {
#define HPCTRAIN_TILE_CASE(n) \
  case n: tile<n>(depth, a, lda, b, ldb, c, ldc, accumulate, m0, m1); break;
    HPCTRAIN_TILE_CASE(1) HPCTRAIN_TILE_CASE(2) HPCTRAIN_TILE_CASE(3) HPCTRAIN_TILE_CASE(4)
    HPCTRAIN_TILE_CASE(5) HPCTRAIN_TILE_CASE(6) HPCTRAIN_TILE_CASE(7) HPCTRAIN_TILE_CASE(8)
    HPCTRAIN_TILE_CASE(9) HPCTRAIN_TILE_CASE(10) HPCTRAIN_TILE_CASE(11) HPCTRAIN_TILE_CASE(12)
#undef HPCTRAIN_TILE_CASE
    default: break;
  }
}
static_assert(kTileRows == 12, "tile_any instantiates tile<1..12>");

bool cpu_has_avx512() {
  static const bool yes = __builtin_cpu_supports("avx512f");
  return yes;
}
#else
void tile_any(int64_t, int64_t, int64_t, const float*, int64_t, const float*, int64_t, float*, int64_t, bool) {}
void transpose16(const float*, int64_t, float*, int64_t) {}
#endif

// dst[c * ldd + r] = src[r * lds + c] for r < rows, c < cols, in 16 x 16 blocks (whole ones through registers).
void transpose(const float* src, int64_t rows, int64_t cols, int64_t lds, float* dst, int64_t ldd) {
  constexpr int64_t block = 16;
  for (int64_t r0 = 0; r0 < rows; r0 += block)
    for (int64_t c0 = 0; c0 < cols; c0 += block) {
      const int64_t r1 = std::min(rows, r0 + block), c1 = std::min(cols, c0 + block);
      if (r1 - r0 == block && c1 - c0 == block) {
        transpose16(src + r0 * lds + c0, lds, dst + c0 * ldd + r0, ldd);
        continue;
      }
      for (int64_t c = c0; c < c1; ++c)
        for (int64_t r = r0; r < r1; ++r) dst[c * ldd + r] = src[r * lds + c];
    }
}

}  // namespace

bool quant4_fused_available() {
#if HPCTRAIN_QUANT4_FUSED
  return cpu_has_avx512();
#else
  return false;
#endif
}

int64_t quant4_fused_tokens() { return kTokensPerPass; }

void quant4_pack_tokens(const float* x, int64_t tokens, int64_t in_features, float* xt, int64_t stride) {
  for (int64_t t0 = 0; t0 < stride; t0 += kTileCols) {
    float* block = xt + t0 * in_features;
    const int64_t count = std::max<int64_t>(0, std::min(kTileCols, tokens - t0));
    transpose(x + t0 * in_features, count, in_features, in_features, block, kTileCols);
    for (int64_t k = 0; k < in_features; ++k)
      std::fill(block + k * kTileCols + count, block + (k + 1) * kTileCols, 0.0F);
  }
}

void quant4_matmul_xwt(const Quant4CpuArgs& w, int64_t in_features, const float* xt, int64_t stride, int64_t tokens,
                       float* y, int64_t ldy, int64_t row_first, int64_t row_last) {
  thread_local std::vector<float> slice, yt;
  slice.resize(kStrip * kDepth);
  yt.resize(kStrip * stride);
  for (int64_t n0 = row_first; n0 < row_last; n0 += kStrip) {
    const int64_t rows = std::min(kStrip, row_last - n0);
    for (int64_t k0 = 0; k0 < in_features; k0 += kDepth) {
      const int64_t depth = std::min(kDepth, in_features - k0);
      quant4_dequantize_rows(w, in_features, n0, rows, k0, depth, slice.data(), depth);
      if (k0 + kDepth < in_features)
        prefetch_slice(w, in_features, n0, rows, k0 + kDepth, std::min(kDepth, in_features - k0 - kDepth));
      else if (n0 + kStrip < row_last)
        prefetch_slice(w, in_features, n0 + kStrip, std::min(kStrip, row_last - n0 - kStrip), 0,
                       std::min(kDepth, in_features));
      for (int64_t r0 = 0; r0 < rows; r0 += kTileRows)
        for (int64_t t0 = 0; t0 < stride; t0 += kTileCols)
          tile_any(std::min(kTileRows, rows - r0), kTileCols, depth, slice.data() + r0 * depth, depth,
                   xt + t0 * in_features + k0 * kTileCols, kTileCols, yt.data() + r0 * stride + t0, stride, k0 > 0);
    }
    transpose(yt.data(), rows, tokens, stride, y + n0, ldy);
  }
}

void quant4_matmul_xw(const Quant4CpuArgs& w, int64_t out_features, int64_t in_features, const float* dy,
                      int64_t tokens, float* dx, int64_t col_first, int64_t col_last) {
  thread_local std::vector<float> panel, rows;
  panel.resize(kDepth * kPanel);
  rows.resize(tokens * kDepth);  // 1 KiB per token; dx's columns are summed over the slices of the reduction in turn
  for (int64_t n0 = 0; n0 < out_features; n0 += kDepth) {
    const int64_t depth = std::min(kDepth, out_features - n0);
    // This slice of dy's rows, regrouped: rows[t * depth + p] = dy[t][n0 + p].
    for (int64_t t = 0; t < tokens; ++t) std::copy_n(dy + t * out_features + n0, depth, rows.data() + t * depth);
    for (int64_t k0 = col_first; k0 < col_last; k0 += kPanel) {
      const int64_t width = std::min(kPanel, col_last - k0);
      // The panel in column blocks of kTileCols: panel[c0 * kDepth + p * kTileCols + c] = W[n0 + p][k0 + c0 + c].
      for (int64_t c0 = 0; c0 < width; c0 += kTileCols)
        quant4_dequantize_rows(w, in_features, n0, depth, k0 + c0, std::min(kTileCols, width - c0),
                               panel.data() + c0 * kDepth, kTileCols);
      if (k0 + kPanel < col_last)
        prefetch_slice(w, in_features, n0, depth, k0 + kPanel, std::min(kPanel, col_last - k0 - kPanel));
      else if (n0 + kDepth < out_features)
        prefetch_slice(w, in_features, n0 + kDepth, std::min(kDepth, out_features - n0 - kDepth), col_first,
                       std::min(kPanel, col_last - col_first));
      for (int64_t t0 = 0; t0 < tokens; t0 += kTileRows)
        for (int64_t c0 = 0; c0 < width; c0 += kTileCols)
          tile_any(std::min(kTileRows, tokens - t0), std::min(kTileCols, width - c0), depth, rows.data() + t0 * depth,
                   depth, panel.data() + c0 * kDepth, kTileCols, dx + t0 * in_features + k0 + c0, in_features, n0 > 0);
    }
  }
}

}  // namespace hpctrain::models::detail
