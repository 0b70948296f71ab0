// 4-bit blockwise quantization of a frozen weight as bitsandbytes 0.50 does it on the CPU (QLoRA, Dettmers et al.
// 2023): NF4 (NormalFloat) or FP4 codes, two per byte, one absmax per block of `blocksize` elements, and optionally
// ("double quantization", bitsandbytes' compress_statistics) the absmax values themselves 8-bit quantized in blocks
// of 256 after their mean is subtracted. quantize_4bit gives bitsandbytes' bytes exactly (Note [4-bit rounding]);
// dequantize_4bit its dequantized weight exactly. Does not decide which weights are quantized nor multiply
// (models/quantized_linear.hpp).
//
// Note [4-bit rounding]
// What bitsandbytes 0.50's CPU backend computes, step by step (checked against its goldens in
// tests/models/nf4_test.cpp, made by tests/models/golden/nf4/make_nf4_golden.py):
//  - quantize_4bit (backends/default/ops.py, torch ops): the weight flattened, as float32; per block of B elements
//    a = max |x|. A whole block scales x * fl(1 / max(a, 1e-38)) (a reciprocal, then a product), the last partial
//    block x / max(a, 1e-38) (a quotient), both clamped to [-1, 1]. The code is the number of the type's sorted
//    midpoints fl((v[i] + v[i+1]) / 2) strictly below the scaled value (torch.bucketize: a value on a midpoint
//    takes the lower code), mapped through the sort order for FP4 (whose table is in bit order; +0 sorts before
//    -0, so tiny positive values get the -0 code, as in bitsandbytes). Codes are packed two per byte, the first
//    element in the high nibble; an odd count is padded with the code of 0. The stored absmax is a, except for a
//    partial last block: max(a, 1e-38).
//  - nested absmax (compress_statistics): offset = the float32 mean of the absmax vector (torch's mean), then the
//    8-bit CPU kernel on absmax - offset in blocks of 256 with the signed dynamic map: per block m = max |y| (a block
//    of zeros keeps m = 0 and codes 0); each y * fl(1 / m), clamped to [-1, 1], indexes a table of 65,536 bins over
//    [-1, 1]: bin u = trunc(((y' + 1) * 0.5) * 65535 + 0.5), each bin holding the number of the map's midpoints
//    fl(0.5 * (c[i] + c[i+1])) below the bin's value fl(-1 + fl(2 i) / 65535). So the code is not always the
//    nearest map value (it is the nearest to the bin's value).
//  - dequantize: absmax = fl(c[code] * m) + offset (nested) or the stored absmax; element = fl(v[code] * absmax),
//    rounded to bfloat16 (to nearest even) when the compute dtype is bfloat16.
#pragma once

#include <ATen/core/Tensor.h>

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace hpctrain::models {

enum class Quant4Type { nf4, fp4 };

// --quantize-base nf4|fp4 [--double-quant|--no-double-quant] [--quant-blocksize 64].
struct Quant4Options {
  Quant4Type type = Quant4Type::nf4;
  int64_t blocksize = 64;     // elements per absmax block: a power of two from 32 to 4096 (bitsandbytes' sizes)
  bool double_quant = true;   // the absmax values 8-bit quantized in blocks of 256 (compress_statistics)
  // Which weights quantize_frozen_base takes (not the format): also the token embedding and the LM head
  // (--quantize-embeddings, Note [Quantized embeddings] in quantized_embedding.hpp).
  bool embeddings = false;
};
[[nodiscard]] std::string to_string(Quant4Type type);  // "nf4" | "fp4"
// "nf4" | "fp4"; Error naming `option` otherwise.
[[nodiscard]] Quant4Type parse_quant4_type(const std::string& text, const std::string& option);
// Error naming --quant-blocksize unless a power of two from 32 to 4096.
void check_quant4_blocksize(int64_t blocksize);

constexpr int64_t kNestedBlockSize = 256;  // absmax values per block of the nested quantization

// The type's 16 values in code order (bitsandbytes' dequantization table: NF4 ascending, FP4 in bit order).
[[nodiscard]] const std::array<float, 16>& quant4_values(Quant4Type type);

// A weight in 4-bit form: what bitsandbytes' Params4bit + QuantState hold. All tensors live on one device.
struct Quant4Weight {
  at::Tensor codes;    // uint8 [(numel + 1) / 2]: two codes per byte, the first element in the high nibble
  at::Tensor absmax;   // float32 [blocks]; nested: uint8 [blocks], the codes of absmax - offset
  at::Tensor absmax2;  // nested: float32 [ceil(blocks / 256)], the absmax of each block of 256 absmax values
  at::Tensor offset;   // nested: float32 [1], the mean of the blocks' absmax; undefined otherwise
  std::vector<int64_t> shape;  // the weight's shape ([out, in])
  Quant4Options options;

  [[nodiscard]] int64_t numel() const;
  [[nodiscard]] int64_t blocks() const { return (numel() + options.blocksize - 1) / options.blocksize; }
  [[nodiscard]] bool nested() const { return absmax2.defined(); }
  [[nodiscard]] int64_t bytes() const;  // of all its tensors
};

// Bytes a weight of `numel` elements takes in 4-bit form (codes, absmax and, nested, absmax2 and offset).
[[nodiscard]] int64_t quant4_bytes(int64_t numel, const Quant4Options& options);

// bitsandbytes' quantize_4bit(weight, blocksize, compress_statistics, quant_type) (Note [4-bit rounding]): a CPU
// floating tensor of any shape (float32 or lower; computed in float32). Error naming `name` for a non-finite
// element.
[[nodiscard]] Quant4Weight quantize_4bit(const at::Tensor& weight, const Quant4Options& options,
                                         const std::string& name = "weight");
// The absmax per block as float32 (nested: dequantized, offset added), on the weight's device.
[[nodiscard]] at::Tensor block_absmax(const Quant4Weight& weight);
// bitsandbytes' dequantize_4bit: the weight in `dtype` (float32 or bfloat16), its shape, on its device (CPU, or
// CUDA in a build with HPCTRAIN_WITH_CUDA).
[[nodiscard]] at::Tensor dequantize_4bit(const Quant4Weight& weight, at::ScalarType dtype);
// The same into `out` (CPU, contiguous, weight.numel() float32 or bfloat16 elements, any shape): a caller's buffer.
void dequantize_4bit_out(const Quant4Weight& weight, const at::Tensor& out);
// Rows `rows` (integer indices of any shape) of a 2-d weight [R, C], dequantized: [rows..., C] (an embedding's lookup
// without the whole weight in full precision; on CUDA the whole weight is dequantized, then indexed).
[[nodiscard]] at::Tensor dequantize_4bit_rows(const Quant4Weight& weight, const at::Tensor& rows, at::ScalarType dtype);

}  // namespace hpctrain::models
