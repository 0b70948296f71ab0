// 4-bit quantization against bitsandbytes 0.50.2's CPU backend (tests/models/golden/nf4/make_nf4_golden.py): the
// packed codes, the absmax (float32, or nested: codes, absmax2 and offset) and the dequantized weights, bit for bit,
// for random weights of several shapes and real ones (MiniLM-L6, a tiny GPT-2 and Llama), NF4 and FP4.
#include <boost/test/unit_test.hpp>

#include <ATen/ATen.h>

#include <filesystem>
#include <set>

#include "hpctrain/core/error.hpp"
#include "hpctrain/models/nf4.hpp"
#include "models/nf4_cpu.hpp"
#include "hpctrain/models/tensor_io.hpp"

using namespace hpctrain;
using namespace hpctrain::models;

namespace {

const TensorMap& nf4_golden() {
  static const TensorMap tensors =
      load_tensor_file(std::filesystem::path(HPCTRAIN_TEST_DATA_DIR) / "models/golden/nf4/nf4_golden.safetensors");
  return tensors;
}

std::set<std::string> golden_cases() {
  std::set<std::string> names;
  for (const auto& [key, tensor] : nf4_golden())
    if (key.size() > 6 && key.compare(key.size() - 6, 6, ".input") == 0) names.insert(key.substr(0, key.size() - 6));
  return names;
}

bool same_bits(const at::Tensor& a, const at::Tensor& b) {
  return a.scalar_type() == b.scalar_type() && a.numel() == b.numel() &&
         at::equal(a.reshape({-1}).view(at::kByte), b.reshape({-1}).view(at::kByte));
}

// Bit for bit, but for the sign of a zero: bitsandbytes' own dequantizers disagree on FP4's code 8 (its scalar C
// loop gives -0, its AVX-512 loop and its Python fallback +0, as hpctrain).
bool same_bits_but_zero_sign(const at::Tensor& a, const at::Tensor& b) {
  if (a.scalar_type() != b.scalar_type() || a.numel() != b.numel()) return false;
  const at::Tensor x = a.reshape({-1}).to(at::kFloat), y = b.reshape({-1}).to(at::kFloat);
  return at::all(x.view(at::kInt).eq(y.view(at::kInt)) | (x.eq(0) & y.eq(0))).item<bool>();
}

}  // namespace

BOOST_AUTO_TEST_SUITE(nf4_against_bitsandbytes)

BOOST_AUTO_TEST_CASE(golden_file_has_the_cases) {
  BOOST_TEST(golden_cases().size() == 12u);  // random shapes, MiniLM, GPT-2 and Llama weights
}

// quantize_4bit: codes, absmax, absmax2 and offset equal bitsandbytes', byte for byte.
BOOST_AUTO_TEST_CASE(quantization_is_bit_exact) {
  for (const std::string& name : golden_cases()) {
    const at::Tensor input = nf4_golden().at(name + ".input");
    for (const Quant4Type type : {Quant4Type::nf4, Quant4Type::fp4}) {
      for (const bool nested : {false, true}) {
        const std::string key = name + "." + to_string(type) + "." + (nested ? "1" : "0");
        const Quant4Weight ours = quantize_4bit(input, Quant4Options{type, 64, nested}, name);
        BOOST_TEST(same_bits(ours.codes, nf4_golden().at(key + ".codes")), key << ": codes");
        BOOST_TEST(same_bits(ours.absmax, nf4_golden().at(key + ".absmax")), key << ": absmax");
        BOOST_TEST(ours.nested() == nested, key);
        if (nested) {
          BOOST_TEST(same_bits(ours.absmax2, nf4_golden().at(key + ".absmax2")), key << ": absmax2");
          BOOST_TEST(same_bits(ours.offset, nf4_golden().at(key + ".offset")), key << ": offset");
        }
        BOOST_TEST(ours.shape == input.sizes().vec(), key);
        BOOST_TEST(ours.bytes() == quant4_bytes(input.numel(), ours.options), key);
      }
    }
  }
}

// dequantize_4bit of our quantization: bitsandbytes' float32 and bfloat16 weights, bit for bit (a zero's sign aside).
BOOST_AUTO_TEST_CASE(dequantization_is_bit_exact) {
  int checked = 0;
  for (const auto& [key, expected] : nf4_golden()) {
    const bool bf16 = key.find(".dequant_bf16") != std::string::npos;
    if (key.find(".dequant") == std::string::npos) continue;
    const std::string name = key.substr(0, key.find('.'));
    const Quant4Type type = key.find(".fp4.") != std::string::npos ? Quant4Type::fp4 : Quant4Type::nf4;
    const Quant4Weight ours = quantize_4bit(nf4_golden().at(name + ".input"), Quant4Options{type, 64, true}, name);
    const at::Tensor dequantized = dequantize_4bit(ours, bf16 ? at::kBFloat16 : at::kFloat);
    BOOST_TEST(dequantized.sizes() == expected.sizes(), key);
    BOOST_TEST(same_bits_but_zero_sign(dequantized, expected), key);
    ++checked;
  }
  BOOST_TEST(checked == 12);
}

// The AVX-512 loop gives the scalar loop's bits (every range start and end, block sizes 32 to 256, float32 and
// bfloat16; the goldens above go through whichever this CPU runs), and a lookup of rows gives the whole weight's rows.
BOOST_AUTO_TEST_CASE(vector_and_scalar_dequantization_agree) {
  torch::manual_seed(11);
  if (!models::detail::quant4_vectorized_available()) BOOST_TEST_MESSAGE("no AVX-512 here: both sides run the scalar loop");
  for (const int64_t blocksize : {32, 64, 256}) {
    const Quant4Weight w = quantize_4bit(at::randn({37, 96}), Quant4Options{Quant4Type::nf4, blocksize, true});
    const at::Tensor absmax = block_absmax(w).contiguous();
    for (const bool bf16 : {false, true}) {
      const at::ScalarType dtype = bf16 ? at::kBFloat16 : at::kFloat;
      const models::detail::Quant4CpuArgs args = models::detail::quant4_cpu_args(w, absmax, dtype);
      for (const auto& [first, last] : std::vector<std::pair<int64_t, int64_t>>{{0, w.numel()}, {0, 31}, {1, 97},
                                                                                {31, 3000}, {64, 96}, {3, w.numel()}}) {
        at::Tensor vector = at::full({last - first}, 7, dtype), scalar = at::full({last - first}, 7, dtype);
        models::detail::quant4_dequantize_range(args, first, last, vector.data_ptr(), true);
        models::detail::quant4_dequantize_range(args, first, last, scalar.data_ptr(), false);
        BOOST_TEST(same_bits(vector, scalar), "block " << blocksize << " bf16 " << bf16 << " [" << first << ", " << last << ")");
      }
      if (!bf16) {  // a slice of rows, as the fused products dequantize it: whole groups of 32 and not
        for (const auto& [col, width] : std::vector<std::pair<int64_t, int64_t>>{{32, 64}, {0, 96}, {3, 40}}) {
          at::Tensor slice = at::full({4, 100}, 7.0F), expected = at::full({4, 100}, 7.0F);
          models::detail::quant4_dequantize_rows(args, 96, 30, 4, col, width, slice.data_ptr<float>(), 100);
          for (int64_t r = 0; r < 4; ++r)
            models::detail::quant4_dequantize_range(args, (30 + r) * 96 + col, (30 + r) * 96 + col + width,
                                                    expected.data_ptr<float>() + r * 100, false);
          BOOST_TEST(same_bits(slice, expected),
                     "block " << blocksize << " columns [" << col << ", " << col + width << ")");
        }
      }
      const at::Tensor rows = at::tensor(std::vector<int64_t>{5, 0, 36, 5, 17, 2}).view({2, 3});
      const at::Tensor looked_up = dequantize_4bit_rows(w, rows, dtype);
      BOOST_TEST((looked_up.sizes() == std::vector<int64_t>{2, 3, 96}));
      BOOST_TEST(same_bits(looked_up, dequantize_4bit(w, dtype).index_select(0, rows.view({-1})).view({2, 3, 96})));
    }
  }
  const Quant4Weight w = quantize_4bit(at::randn({4, 64}), Quant4Options{});
  BOOST_CHECK_THROW((void)dequantize_4bit_rows(w, at::tensor(std::vector<int64_t>{4}), at::kFloat), Error);
}

BOOST_AUTO_TEST_CASE(bytes_per_weight) {
  // 4.127 bits per weight with double quantization at blocksize 64 (QLoRA's figure), 4.5 without.
  const int64_t n = 64 * 256 * 16;
  BOOST_TEST(quant4_bytes(n, Quant4Options{Quant4Type::nf4, 64, true}) == n / 2 + n / 64 + 4 * 16 + 4);
  BOOST_TEST(quant4_bytes(n, Quant4Options{Quant4Type::nf4, 64, false}) == n / 2 + 4 * (n / 64));
}

BOOST_AUTO_TEST_CASE(refusals_name_the_option_or_tensor) {
  BOOST_CHECK_EXCEPTION(check_quant4_blocksize(48), Error, [](const Error& e) {
    return std::string(e.what()).find("--quant-blocksize 48: expected a power of two") != std::string::npos;
  });
  BOOST_CHECK_NO_THROW(check_quant4_blocksize(64));
  BOOST_CHECK_THROW(check_quant4_blocksize(8192), Error);
  BOOST_CHECK_EXCEPTION((void)parse_quant4_type("int4", "--quantize-base"), Error, [](const Error& e) {
    return std::string(e.what()).find("--quantize-base 'int4': expected nf4 or fp4") != std::string::npos;
  });
  at::Tensor bad = at::randn({4, 64});
  bad[1][3] = std::numeric_limits<float>::quiet_NaN();
  BOOST_CHECK_EXCEPTION((void)quantize_4bit(bad, Quant4Options{}, "q_proj.weight"), Error, [](const Error& e) {
    return std::string(e.what()).find("'q_proj.weight' holds NaN") != std::string::npos;
  });
}

BOOST_AUTO_TEST_SUITE_END()
