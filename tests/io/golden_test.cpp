// Reads tests/io/golden/reference.safetensors (written by make_safetensors.py with torch 1.13): known
// values in every dtype, our fp16/bf16 conversions against torch's, and a byte-identical re-save.
#include "hpctrain/io/half.hpp"
#include "hpctrain/io/safetensors.hpp"
#include "io_test_util.hpp"

#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstring>
#include <limits>

namespace io = hpctrain::io;
using io::test::element;
using io::test::read_bytes;
using io::test::ScratchDir;

namespace {

const std::filesystem::path kGolden = std::filesystem::path(HPCTRAIN_TEST_DATA_DIR) / "io/golden/reference.safetensors";

std::uint32_t bits(float value) {
  std::uint32_t out;
  std::memcpy(&out, &value, sizeof out);
  return out;
}

bool f16_is_nan(std::uint16_t h) { return (h & 0x7C00) == 0x7C00 && (h & 0x3FF) != 0; }
bool bf16_is_nan(std::uint16_t h) { return (h & 0x7F80) == 0x7F80 && (h & 0x7F) != 0; }

template <typename T>
std::vector<T> values(const io::TensorView& tensor) {
  std::vector<T> out(tensor.nbytes / sizeof(T));
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = element<T>(tensor, i);
  return out;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(golden)

BOOST_AUTO_TEST_CASE(known_values_in_every_dtype) {
  const io::SafetensorsFile file(kGolden);
  BOOST_TEST(file.metadata().at("format") == "pt");
  BOOST_TEST(values<double>(file.tensor("known.f64")) == std::vector<double>({0.0, -1.5, 1e300, 3.141592653589793}),
             boost::test_tools::per_element());
  const io::TensorView& f32 = file.tensor("known.f32");
  BOOST_TEST(f32.shape == std::vector<std::int64_t>({2, 2}), boost::test_tools::per_element());
  BOOST_TEST(values<float>(f32) == std::vector<float>({1.0f, -2.5f, std::numeric_limits<float>::max(),
                                                       std::numeric_limits<float>::denorm_min()}),
             boost::test_tools::per_element());
  BOOST_TEST(io::to_f32(file.tensor("known.f16")) ==
                 std::vector<float>({1.0f, -2.0f, 65504.0f, std::ldexp(1.0f, -14), std::ldexp(1.0f, -24)}),
             boost::test_tools::per_element());
  BOOST_TEST(values<std::uint16_t>(file.tensor("known.bf16")) == std::vector<std::uint16_t>({0x3F80, 0xC000, 0x3DCD, 0x7F7F}),
             boost::test_tools::per_element());
  BOOST_TEST(values<std::int64_t>(file.tensor("known.i64")) == std::vector<std::int64_t>({INT64_MIN, -1, 0, INT64_MAX}),
             boost::test_tools::per_element());
  BOOST_TEST(values<std::int32_t>(file.tensor("known.i32")) == std::vector<std::int32_t>({INT32_MIN, -1, 0, INT32_MAX}),
             boost::test_tools::per_element());
  BOOST_TEST(values<std::int16_t>(file.tensor("known.i16")) == std::vector<std::int16_t>({-32768, -1, 0, 32767}),
             boost::test_tools::per_element());
  BOOST_TEST(values<std::int8_t>(file.tensor("known.i8")) == std::vector<std::int8_t>({-128, -1, 0, 127}),
             boost::test_tools::per_element());
  BOOST_TEST(values<std::uint8_t>(file.tensor("known.u8")) == std::vector<std::uint8_t>({0, 1, 128, 255}),
             boost::test_tools::per_element());
  BOOST_TEST((file.tensor("known.bool").dtype == io::DType::boolean));
  BOOST_TEST(values<std::uint8_t>(file.tensor("known.bool")) == std::vector<std::uint8_t>({1, 0, 1}),
             boost::test_tools::per_element());
  BOOST_TEST(file.tensor("known.scalar").shape.empty());
  BOOST_TEST(io::to_f32(file.tensor("known.scalar")).at(0) == 42.0f);
  BOOST_TEST(file.tensor("known.empty").shape == std::vector<std::int64_t>({0, 3}), boost::test_tools::per_element());
  BOOST_TEST(file.tensor("known.empty").nbytes == 0u);
}

BOOST_AUTO_TEST_CASE(narrowing_matches_torch_bit_for_bit) {
  const io::SafetensorsFile file(kGolden);
  const std::vector<float> source = values<float>(file.tensor("conv.source"));
  const std::vector<std::uint16_t> f16 = values<std::uint16_t>(file.tensor("conv.f16"));
  const std::vector<std::uint16_t> bf16 = values<std::uint16_t>(file.tensor("conv.bf16"));
  BOOST_REQUIRE(source.size() > 1000u);
  BOOST_REQUIRE_EQUAL(f16.size(), source.size());
  BOOST_REQUIRE_EQUAL(bf16.size(), source.size());
  std::size_t nans = 0;
  for (std::size_t i = 0; i < source.size(); ++i) {
    const std::uint16_t ours16 = io::f32_to_f16(source[i]);
    const std::uint16_t oursb = io::f32_to_bf16(source[i]);
    if (std::isnan(source[i])) {  // NaN bit patterns differ between torch's scalar and vector paths
      ++nans;
      BOOST_CHECK(f16_is_nan(ours16) && f16_is_nan(f16[i]));
      BOOST_CHECK(bf16_is_nan(oursb) && bf16_is_nan(bf16[i]));
      continue;
    }
    BOOST_CHECK_MESSAGE(ours16 == f16[i], "f16 of " << source[i] << " (0x" << std::hex << bits(source[i]) << "): ours 0x"
                                                    << ours16 << ", torch 0x" << f16[i]);
    BOOST_CHECK_MESSAGE(oursb == bf16[i], "bf16 of " << source[i] << " (0x" << std::hex << bits(source[i]) << "): ours 0x"
                                                     << oursb << ", torch 0x" << bf16[i]);
  }
  BOOST_TEST(nans >= 1u);
}

BOOST_AUTO_TEST_CASE(widening_matches_torch_bit_for_bit) {
  const io::SafetensorsFile file(kGolden);
  const std::vector<float> ours16 = io::to_f32(file.tensor("conv.f16"));
  const std::vector<float> oursb = io::to_f32(file.tensor("conv.bf16"));
  const std::vector<float> torch16 = values<float>(file.tensor("conv.f16_to_f32"));
  const std::vector<float> torchb = values<float>(file.tensor("conv.bf16_to_f32"));
  BOOST_REQUIRE_EQUAL(ours16.size(), torch16.size());
  BOOST_REQUIRE_EQUAL(oursb.size(), torchb.size());
  for (std::size_t i = 0; i < ours16.size(); ++i) {
    if (std::isnan(torch16[i])) {
      BOOST_CHECK(std::isnan(ours16[i]));
    } else {
      BOOST_CHECK_EQUAL(bits(ours16[i]), bits(torch16[i]));
    }
    if (std::isnan(torchb[i])) {
      BOOST_CHECK(std::isnan(oursb[i]));
    } else {
      BOOST_CHECK_EQUAL(bits(oursb[i]), bits(torchb[i]));
    }
  }
}

BOOST_AUTO_TEST_CASE(resave_reproduces_the_reference_bytes) {
  ScratchDir dir;
  const io::SafetensorsFile file(kGolden);
  io::save_safetensors(dir / "resaved.safetensors", file.tensors(), file.metadata());
  BOOST_TEST(read_bytes(dir / "resaved.safetensors") == read_bytes(kGolden));
}

BOOST_AUTO_TEST_SUITE_END()
