// The CUDA 4-bit dequantization's per-element logic (src/models/nf4_kernel.hpp, compiled for the host from the same
// header as the kernel in nf4_cuda.cu) against the CPU dequantize_4bit, bit for bit: one thread per element reads
// its nibble and its block's absmax (nested: dequantized by one thread per block), for NF4 and FP4, float32 and
// bfloat16, a partial last block and more than one nested block.
#include <boost/test/unit_test.hpp>

#include <ATen/ATen.h>

#include <cstring>
#include <vector>

#include "hpctrain/core/dynamic_map.hpp"
#include "hpctrain/models/nf4.hpp"
#include "models/nf4_kernel.hpp"

using namespace hpctrain::models;
namespace quant4 = hpctrain::models::detail;

namespace {

// What the two kernels compute, thread by thread, on the host.
std::vector<std::uint32_t> kernel_bits(const Quant4Weight& w, bool bf16) {
  std::vector<float> absmax(static_cast<size_t>(w.blocks()));
  if (w.nested()) {
    const std::array<float, 256> map = hpctrain::core::dynamic_map(true);
    for (int64_t b = 0; b < w.blocks(); ++b)  // nested_absmax_kernel: one thread per block
      absmax[b] = quant4::nested_absmax(map.data(), w.absmax.data_ptr<std::uint8_t>(), w.absmax2.data_ptr<float>(),
                                        w.offset.item<float>(), b);
  } else {
    std::memcpy(absmax.data(), w.absmax.data_ptr<float>(), absmax.size() * sizeof(float));
  }
  std::vector<std::uint32_t> out(static_cast<size_t>(w.numel()));
  for (int64_t i = 0; i < w.numel(); ++i) {  // dequantize_kernel: one thread per element
    const float value = quant4::quant4_element(w.codes.data_ptr<std::uint8_t>(), quant4_values(w.options.type).data(),
                                               absmax[i / w.options.blocksize], i);
    std::uint32_t bits;
    std::memcpy(&bits, &value, sizeof bits);
    out[i] = bf16 ? quant4::quant4_to_bf16(value) : bits;
  }
  return out;
}

std::vector<std::uint32_t> cpu_bits(const Quant4Weight& w, bool bf16) {
  const at::Tensor d = dequantize_4bit(w, bf16 ? at::kBFloat16 : at::kFloat).reshape({-1});
  std::vector<std::uint32_t> out(static_cast<size_t>(d.numel()));
  for (int64_t i = 0; i < d.numel(); ++i) {
    if (bf16) {
      std::uint16_t half;
      std::memcpy(&half, d.data_ptr<at::BFloat16>() + i, sizeof half);
      out[i] = half;
    } else {
      std::memcpy(&out[i], d.data_ptr<float>() + i, sizeof(float));
    }
  }
  return out;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(quant4_kernel_elements)

BOOST_AUTO_TEST_CASE(kernel_elements_equal_the_cpu_dequantization) {
  at::manual_seed(35);
  // 300 x 57 = 17,100 elements: 268 blocks of 64 (the last partial), so two blocks of nested absmax.
  const at::Tensor weight = at::randn({300, 57}) * at::rand({300, 57}).pow(3);
  for (const Quant4Type type : {Quant4Type::nf4, Quant4Type::fp4}) {
    for (const bool nested : {false, true}) {
      const Quant4Weight w = quantize_4bit(weight, Quant4Options{type, 64, nested}, "weight");
      for (const bool bf16 : {false, true})
        BOOST_TEST(kernel_bits(w, bf16) == cpu_bits(w, bf16), to_string(type) << " nested " << nested << " bf16 " << bf16);
    }
  }
}

BOOST_AUTO_TEST_CASE(codes_unpack_high_nibble_first) {
  const unsigned char codes[] = {0xA5, 0x3C};
  BOOST_TEST(quant4::quant4_code(codes, 0) == 0xAu);
  BOOST_TEST(quant4::quant4_code(codes, 1) == 0x5u);
  BOOST_TEST(quant4::quant4_code(codes, 2) == 0x3u);
  BOOST_TEST(quant4::quant4_code(codes, 3) == 0xCu);
}

BOOST_AUTO_TEST_SUITE_END()
