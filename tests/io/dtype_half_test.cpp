// DType table, fp16/bf16 conversions (exhaustive over 16-bit patterns), parse_size, plan_shards.
#include "hpctrain/io/half.hpp"
#include "hpctrain/io/safetensors.hpp"
#include "io_test_util.hpp"

#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstring>
#include <limits>

namespace io = hpctrain::io;
using io::test::require_error;

namespace {
std::uint32_t bits(float value) {
  std::uint32_t out;
  std::memcpy(&out, &value, sizeof out);
  return out;
}
float from_bits(std::uint32_t value) {
  float out;
  std::memcpy(&out, &value, sizeof out);
  return out;
}
}  // namespace

BOOST_AUTO_TEST_SUITE(dtype)

BOOST_AUTO_TEST_CASE(names_sizes_and_parse_round_trip) {
  for (const io::DType dtype : io::kAllDTypes) {
    BOOST_TEST(io::parse_dtype(io::dtype_name(dtype)) == dtype);
  }
  BOOST_TEST(io::item_size(io::DType::f64) == 8u);
  BOOST_TEST(io::item_size(io::DType::bf16) == 2u);
  BOOST_TEST(io::item_size(io::DType::boolean) == 1u);
  BOOST_TEST(io::dtype_name(io::DType::boolean) == "BOOL");
  BOOST_TEST(!io::parse_dtype("f32").has_value());  // case-sensitive, as safetensors
  BOOST_TEST(!io::parse_dtype("F8_E4M3").has_value());
  BOOST_TEST(io::supported_dtype_names() == "F64, F32, F16, BF16, I64, I32, I16, I8, U8, BOOL");
}

BOOST_AUTO_TEST_CASE(checked_nbytes_rejects_negative_and_overflow) {
  BOOST_TEST(io::checked_nbytes({2, 3}, io::DType::f32) == std::optional<std::size_t>(24));
  BOOST_TEST(io::checked_nbytes({}, io::DType::f64) == std::optional<std::size_t>(8));
  BOOST_TEST(io::checked_nbytes({0, 1LL << 62}, io::DType::f32) == std::optional<std::size_t>(0));
  BOOST_TEST(!io::checked_nbytes({-1}, io::DType::u8).has_value());
  BOOST_TEST(!io::checked_nbytes({1LL << 32, 1LL << 32}, io::DType::u8).has_value());
  BOOST_TEST(!io::checked_nbytes({1LL << 62}, io::DType::f32).has_value());
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(half)

BOOST_AUTO_TEST_CASE(f16_widen_then_narrow_is_identity_for_all_patterns) {
  for (std::uint32_t pattern = 0; pattern <= 0xFFFF; ++pattern) {
    const auto h = static_cast<std::uint16_t>(pattern);
    const float wide = io::f16_to_f32(h);
    const bool is_nan = (h & 0x7C00) == 0x7C00 && (h & 0x3FF) != 0;
    BOOST_REQUIRE_EQUAL(std::isnan(wide), is_nan);
    if (!is_nan) BOOST_REQUIRE_EQUAL(io::f32_to_f16(wide), h);
  }
}

BOOST_AUTO_TEST_CASE(bf16_widen_then_narrow_is_identity_for_all_patterns) {
  for (std::uint32_t pattern = 0; pattern <= 0xFFFF; ++pattern) {
    const auto h = static_cast<std::uint16_t>(pattern);
    const float wide = io::bf16_to_f32(h);
    BOOST_REQUIRE_EQUAL(bits(wide), pattern << 16);
    if (!std::isnan(wide)) BOOST_REQUIRE_EQUAL(io::f32_to_bf16(wide), h);
  }
}

BOOST_AUTO_TEST_CASE(f16_known_values_and_rounding) {
  BOOST_TEST(io::f16_to_f32(0x3C00) == 1.0f);
  BOOST_TEST(io::f16_to_f32(0x7BFF) == 65504.0f);
  BOOST_TEST(io::f16_to_f32(0x0001) == std::ldexp(1.0f, -24));
  BOOST_TEST(io::f16_to_f32(0x0400) == std::ldexp(1.0f, -14));
  BOOST_TEST(bits(io::f16_to_f32(0x8000)) == 0x80000000u);
  BOOST_TEST(io::f32_to_f16(65519.0f) == 0x7BFF);
  BOOST_TEST(io::f32_to_f16(65520.0f) == 0x7C00);  // tie at the top rounds to even: inf
  BOOST_TEST(io::f32_to_f16(-1e9f) == 0xFC00);
  BOOST_TEST(io::f32_to_f16(std::ldexp(1.0f, -25)) == 0x0000);                     // tie -> even (zero)
  BOOST_TEST(io::f32_to_f16(std::nextafter(std::ldexp(1.0f, -25), 1.0f)) == 0x0001);
  BOOST_TEST(io::f32_to_f16(3 * std::ldexp(1.0f, -25)) == 0x0002);                 // 1.5 ulp tie -> even
  BOOST_TEST(io::f32_to_f16(1.0f + std::ldexp(1.0f, -11)) == 0x3C00);              // tie -> even (down)
  BOOST_TEST(io::f32_to_f16(1.0f + 3 * std::ldexp(1.0f, -11)) == 0x3C02);          // tie -> even (up)
  BOOST_TEST(io::f32_to_f16(std::numeric_limits<float>::quiet_NaN()) == 0x7E00);
  BOOST_TEST(io::f32_to_f16(-std::numeric_limits<float>::quiet_NaN()) == 0xFE00);
  BOOST_TEST(io::f32_to_f16(std::numeric_limits<float>::denorm_min()) == 0x0000);
}

BOOST_AUTO_TEST_CASE(bf16_known_values_and_rounding) {
  BOOST_TEST(io::f32_to_bf16(1.0f) == 0x3F80);
  BOOST_TEST(io::f32_to_bf16(0.1f) == 0x3DCD);
  BOOST_TEST(io::f32_to_bf16(from_bits(0x3F808000)) == 0x3F80);  // tie -> even (down)
  BOOST_TEST(io::f32_to_bf16(from_bits(0x3F818000)) == 0x3F82);  // tie -> even (up)
  BOOST_TEST(io::f32_to_bf16(std::numeric_limits<float>::max()) == 0x7F80);  // rounds to inf
  BOOST_TEST(io::f32_to_bf16(-std::numeric_limits<float>::infinity()) == 0xFF80);
  BOOST_TEST(io::f32_to_bf16(std::numeric_limits<float>::quiet_NaN()) == 0x7FC0);
}

BOOST_AUTO_TEST_CASE(bulk_conversion_and_errors) {
  const float values[] = {1.0f, -2.0f, 0.5f};
  std::byte half[6];
  io::convert_from_f32(values, 3, io::DType::f16, half);
  float back[3];
  io::convert_to_f32(io::DType::f16, half, 3, back);
  BOOST_TEST(back[0] == 1.0f);
  BOOST_TEST(back[1] == -2.0f);
  BOOST_TEST(back[2] == 0.5f);
  std::byte wide[24];
  io::convert_from_f32(values, 3, io::DType::f64, wide);
  io::convert_to_f32(io::DType::f64, wide, 3, back);
  BOOST_TEST(back[1] == -2.0f);
  require_error([&] { io::convert_to_f32(io::DType::i32, half, 1, back); }, {"I32", "F64, F32, F16 or BF16"});
  const std::string ints = io::test::raw_bytes<std::int32_t>({1, 2});
  require_error([&] { (void)io::to_f32(io::test::view_of("ids", io::DType::i32, {2}, ints)); }, {"'ids'", "I32"});
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(sizes)

BOOST_AUTO_TEST_CASE(parse_size_follows_hugging_face_units) {
  BOOST_TEST(io::parse_size("5GB") == 5'000'000'000ull);
  BOOST_TEST(io::parse_size("5gb") == 5'000'000'000ull);
  BOOST_TEST(io::parse_size(" 10 MB ") == 10'000'000ull);
  BOOST_TEST(io::parse_size("1KB") == 1000ull);
  BOOST_TEST(io::parse_size("2TB") == 2'000'000'000'000ull);
  BOOST_TEST(io::parse_size("1KiB") == 1024ull);
  BOOST_TEST(io::parse_size("3MiB") == 3ull << 20);
  BOOST_TEST(io::parse_size("2GiB") == 2ull << 30);
  BOOST_TEST(io::parse_size("1.5GB") == 1'500'000'000ull);
  BOOST_TEST(io::parse_size("0.5KiB") == 512ull);
  BOOST_TEST(io::parse_size("123") == 123ull);
  BOOST_TEST(io::parse_size("123B") == 123ull);
  BOOST_TEST(io::parse_size("18446744073709551615") == UINT64_MAX);
  require_error([] { (void)io::parse_size("5 parsecs"); }, {"'5 parsecs'", "KiB"});
  require_error([] { (void)io::parse_size("GB"); }, {"'GB'"});
  require_error([] { (void)io::parse_size("-5GB"); }, {"'-5GB'"});
  require_error([] { (void)io::parse_size(""); }, {"''"});
  require_error([] { (void)io::parse_size("20000000TB"); }, {"too large"});
  require_error([] { (void)io::parse_size("99999999999999999999999999"); }, {"too large"});
}

BOOST_AUTO_TEST_CASE(plan_shards_matches_huggingface_hub) {
  using Plan = std::vector<std::vector<std::size_t>>;
  // huggingface_hub's tests/test_serialization.py::test_multiple_shards: sizes [6, 10, 30, 2, 2], max 10
  // -> layer_1 | layer_3 | layer_2 | layer_4 + layer_5 (the 30 goes out first, layer_2's shard stays open).
  BOOST_TEST((io::plan_shards({6, 10, 30, 2, 2}, 10) == Plan{{0}, {2}, {1}, {3, 4}}));
  // Its docstring: [6, 6, 2, 6, 2, 2] GB with a 10 GB max -> [6], [6+2], [6+2+2].
  BOOST_TEST((io::plan_shards({6, 6, 2, 6, 2, 2}, 10) == Plan{{0}, {1, 2}, {3, 4, 5}}));
  // A tensor above the max gets its own shard at once; the open shard keeps filling.
  BOOST_TEST((io::plan_shards({4, 50, 4, 4}, 10) == Plan{{1}, {0, 2}, {3}}));
  BOOST_TEST((io::plan_shards({1, 2, 3}, 100) == Plan{{0, 1, 2}}));
  BOOST_TEST(io::plan_shards({}, 100).empty());
}

BOOST_AUTO_TEST_SUITE_END()
