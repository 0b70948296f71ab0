// safetensors round trips, the writer's byte layout (against the Rust reference's own test vectors),
// and the writer's input checks.
#include "hpctrain/io/safetensors.hpp"
#include "io_test_util.hpp"

#include <boost/test/unit_test.hpp>

#include <cstring>

namespace io = hpctrain::io;
using io::test::raw_bytes;
using io::test::read_bytes;
using io::test::require_error;
using io::test::ScratchDir;
using io::test::view_of;

namespace {

std::string bytes_of(std::initializer_list<int> values) {
  std::string out;
  for (const int v : values) out.push_back(static_cast<char>(v));
  return out;
}

// One tensor of every dtype, with distinct bytes.
struct AllDTypes {
  std::vector<std::string> buffers;
  std::vector<io::TensorView> views;
  AllDTypes() {
    buffers.reserve(16);
    add("w.f64", io::DType::f64, {2}, raw_bytes<double>({1.25, -3e300}));
    add("w.f32", io::DType::f32, {2, 2}, raw_bytes<float>({1.0f, -2.0f, 3.5f, 1e-40f}));
    add("w.f16", io::DType::f16, {3}, raw_bytes<std::uint16_t>({0x3C00, 0xC000, 0x7BFF}));
    add("w.bf16", io::DType::bf16, {1, 3}, raw_bytes<std::uint16_t>({0x3F80, 0x3DCD, 0xFF80}));
    add("w.i64", io::DType::i64, {2}, raw_bytes<std::int64_t>({INT64_MIN, INT64_MAX}));
    add("w.i32", io::DType::i32, {3}, raw_bytes<std::int32_t>({-7, 0, 7}));
    add("w.i16", io::DType::i16, {2}, raw_bytes<std::int16_t>({-32768, 32767}));
    add("w.i8", io::DType::i8, {2}, raw_bytes<std::int8_t>({-128, 127}));
    add("w.u8", io::DType::u8, {4}, raw_bytes<std::uint8_t>({0, 1, 128, 255}));
    add("w.bool", io::DType::boolean, {3}, raw_bytes<std::uint8_t>({1, 0, 1}));
    add("w.scalar", io::DType::f32, {}, raw_bytes<float>({42.0f}));
    add("w.empty", io::DType::f32, {0, 4}, "");
  }
  void add(const std::string& name, io::DType dtype, std::vector<std::int64_t> shape, std::string bytes) {
    buffers.push_back(std::move(bytes));
    views.push_back(view_of(name, dtype, std::move(shape), buffers.back()));
  }
};

void check_same_tensors(const std::vector<io::TensorView>& expected, const io::SafetensorsFile& file) {
  BOOST_TEST(file.tensors().size() == expected.size());
  for (const io::TensorView& want : expected) {
    BOOST_TEST_CONTEXT("tensor " << want.name) {
      BOOST_REQUIRE(file.contains(want.name));
      const io::TensorView& got = file.tensor(want.name);
      BOOST_TEST((got.dtype == want.dtype));
      BOOST_TEST(got.shape == want.shape, boost::test_tools::per_element());
      BOOST_REQUIRE_EQUAL(got.nbytes, want.nbytes);
      BOOST_TEST(std::memcmp(got.data, want.data, want.nbytes) == 0);
    }
  }
}

}  // namespace

BOOST_AUTO_TEST_SUITE(safetensors_roundtrip)

BOOST_AUTO_TEST_CASE(all_dtypes_and_metadata_round_trip_bit_identically) {
  ScratchDir dir;
  const AllDTypes input;
  const io::Metadata metadata{{"format", "pt"}, {"step", "1200"}, {"note", "caf\xc3\xa9 \"quoted\""}};
  io::save_safetensors(dir / "a.safetensors", input.views, metadata);

  const io::SafetensorsFile first(dir / "a.safetensors");
  check_same_tensors(input.views, first);
  BOOST_TEST((first.metadata() == metadata));
  BOOST_TEST(first.header_bytes() % 8 == 0u);

  io::save_safetensors(dir / "b.safetensors", first.tensors(), first.metadata());
  BOOST_TEST(read_bytes(dir / "a.safetensors") == read_bytes(dir / "b.safetensors"));
  const io::SafetensorsFile second(dir / "b.safetensors");
  check_same_tensors(input.views, second);
}

BOOST_AUTO_TEST_CASE(layout_is_dtype_descending_then_name) {
  ScratchDir dir;
  const AllDTypes input;
  io::save_safetensors(dir / "a.safetensors", input.views);
  const io::SafetensorsFile file(dir / "a.safetensors");
  std::vector<std::string> order;
  for (const io::TensorView& tensor : file.tensors()) order.push_back(tensor.name);
  // I64 > F64 > F32 (by name: empty, f32, scalar) > I32 > BF16 > F16 > I16 > I8 > U8 > BOOL.
  const std::vector<std::string> expected{"w.i64", "w.f64", "w.empty", "w.f32", "w.scalar", "w.i32",
                                          "w.bf16", "w.f16", "w.i16", "w.i8", "w.u8", "w.bool"};
  BOOST_TEST(order == expected, boost::test_tools::per_element());
  BOOST_TEST(file.metadata().empty());
}

BOOST_AUTO_TEST_CASE(resave_over_a_mapped_file_keeps_the_mapping_valid) {
  ScratchDir dir;
  const AllDTypes input;
  io::save_safetensors(dir / "a.safetensors", input.views, {{"format", "pt"}});
  const std::string before = read_bytes(dir / "a.safetensors");
  const io::SafetensorsFile mapped(dir / "a.safetensors");
  io::save_safetensors(dir / "a.safetensors", mapped.tensors(), mapped.metadata());  // tmp + rename
  check_same_tensors(input.views, mapped);
  BOOST_TEST(read_bytes(dir / "a.safetensors") == before);
  BOOST_TEST(!std::filesystem::exists(dir / "a.safetensors.tmp"));
}

// Byte vectors from the Rust reference's own unit tests (safetensors/src/tensor.rs).
BOOST_AUTO_TEST_CASE(matches_the_rust_reference_test_vectors) {
  ScratchDir dir;
  const std::string floats = raw_bytes<float>({0.0f, 1.0f, 2.0f, 3.0f, 4.0f, 5.0f});

  io::save_safetensors(dir / "serialization", {view_of("attn.0", io::DType::f32, {1, 2, 3}, floats)});
  const std::string serialization = bytes_of(
      {64, 0, 0, 0, 0, 0, 0, 0, 123, 34, 97, 116, 116, 110, 46, 48, 34, 58, 123, 34, 100, 116, 121, 112, 101, 34, 58,
       34, 70, 51, 50, 34, 44, 34, 115, 104, 97, 112, 101, 34, 58, 91, 49, 44, 50, 44, 51, 93, 44, 34, 100, 97, 116,
       97, 95, 111, 102, 102, 115, 101, 116, 115, 34, 58, 91, 48, 44, 50, 52, 93, 125, 125, 0, 0, 0, 0, 0, 0, 128,
       63, 0, 0, 0, 64, 0, 0, 64, 64, 0, 0, 128, 64, 0, 0, 160, 64});
  BOOST_TEST(read_bytes(dir / "serialization") == serialization);

  io::save_safetensors(dir / "aligned", {view_of("attn0", io::DType::f32, {1, 1, 2, 3}, floats)});
  const std::string aligned = bytes_of(
      {72, 0, 0, 0, 0, 0, 0, 0, 123, 34, 97, 116, 116, 110, 48, 34, 58, 123, 34, 100, 116, 121, 112, 101, 34, 58, 34,
       70, 51, 50, 34, 44, 34, 115, 104, 97, 112, 101, 34, 58, 91, 49, 44, 49, 44, 50, 44, 51, 93, 44, 34, 100, 97,
       116, 97, 95, 111, 102, 102, 115, 101, 116, 115, 34, 58, 91, 48, 44, 50, 52, 93, 125, 125, 32, 32, 32, 32, 32,
       32, 32, 0, 0, 0, 0, 0, 0, 128, 63, 0, 0, 0, 64, 0, 0, 64, 64, 0, 0, 128, 64, 0, 0, 160, 64});
  BOOST_TEST(read_bytes(dir / "aligned") == aligned);

  io::save_safetensors(dir / "empty", {});
  BOOST_TEST(read_bytes(dir / "empty") == bytes_of({8, 0, 0, 0, 0, 0, 0, 0, 123, 125, 32, 32, 32, 32, 32, 32}));

  io::save_safetensors(dir / "empty_meta", {}, {{"framework", "pt"}});
  const std::string empty_meta = bytes_of(
      {40, 0, 0, 0, 0, 0, 0, 0, 123, 34, 95, 95, 109, 101, 116, 97, 100, 97, 116, 97, 95, 95, 34, 58, 123, 34, 102,
       114, 97, 109, 101, 119, 111, 114, 107, 34, 58, 34, 112, 116, 34, 125, 125, 32, 32, 32, 32, 32});
  BOOST_TEST(read_bytes(dir / "empty_meta") == empty_meta);
  for (const char* name : {"serialization", "aligned", "empty", "empty_meta"}) {
    BOOST_CHECK_NO_THROW(io::SafetensorsFile(dir / name));
  }
}

BOOST_AUTO_TEST_CASE(writer_rejects_bad_input_and_leaves_no_file) {
  ScratchDir dir;
  const std::string four = raw_bytes<float>({1, 2, 3, 4});
  const auto path = dir / "bad.safetensors";
  require_error([&] { io::save_safetensors(path, {view_of("w", io::DType::f32, {2}, four)}); },
                {"bad.safetensors", "'w'", "[2]", "8 bytes", "16 bytes"});
  require_error([&] { io::save_safetensors(path, {view_of("w", io::DType::f32, {-4}, four)}); }, {"'w'", "[-4]"});
  require_error(
      [&] {
        io::save_safetensors(path, {view_of("w", io::DType::f32, {4}, four), view_of("w", io::DType::f32, {4}, four)});
      },
      {"'w'", "twice"});
  require_error([&] { io::save_safetensors(path, {view_of("__metadata__", io::DType::f32, {4}, four)}); },
                {"reserved"});
  require_error([&] { io::save_safetensors(path, {view_of("bad\xff", io::DType::f32, {4}, four)}); }, {"UTF-8"});
  require_error([&] { io::save_safetensors(dir / "no-such-dir" / "x.safetensors", {}); }, {"no-such-dir", "cannot create"});
  BOOST_TEST(!std::filesystem::exists(path));
  BOOST_TEST(!std::filesystem::exists(dir / "bad.safetensors.tmp"));
}

BOOST_AUTO_TEST_CASE(missing_tensor_error_names_file_and_tensor) {
  ScratchDir dir;
  const std::string four = raw_bytes<float>({1, 2, 3, 4});
  io::save_safetensors(dir / "a.safetensors", {view_of("present", io::DType::f32, {4}, four)});
  const io::SafetensorsFile file(dir / "a.safetensors");
  require_error([&] { (void)file.tensor("absent"); }, {"a.safetensors", "'absent'", "present"});
  BOOST_TEST(io::to_f32(file.tensor("present")) == std::vector<float>({1, 2, 3, 4}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_SUITE_END()
