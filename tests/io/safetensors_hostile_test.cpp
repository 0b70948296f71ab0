// Crafted, hostile safetensors files: each must give a clear Error (file, tensor, numbers), never a crash.
#include "hpctrain/io/safetensors.hpp"
#include "io_test_util.hpp"

#include <boost/test/unit_test.hpp>

#include <random>

namespace io = hpctrain::io;
using io::test::le_u64;
using io::test::require_error;
using io::test::safetensors_bytes;
using io::test::ScratchDir;
using io::test::write_bytes;

namespace {

// Writes `bytes` as evil.safetensors and requires opening it to fail with every fragment (plus the file).
void require_rejected(const std::string& bytes, std::initializer_list<std::string> fragments) {
  ScratchDir dir;
  const auto path = dir / "evil.safetensors";
  write_bytes(path, bytes);
  require_error([&] { io::SafetensorsFile file(path); }, {"evil.safetensors"});
  require_error([&] { io::SafetensorsFile file(path); }, fragments);
}

std::string tensor_json(const std::string& name, const std::string& dtype, const std::string& shape,
                        std::uint64_t begin, std::uint64_t end) {
  return fmt::format(R"("{}":{{"dtype":"{}","shape":{},"data_offsets":[{},{}]}})", name, dtype, shape, begin, end);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(safetensors_hostile)

BOOST_AUTO_TEST_CASE(file_shorter_than_the_length_prefix) {
  require_rejected("", {"0 bytes", "at least 8"});
  require_rejected(std::string("\x08\x00\x00", 3), {"3 bytes", "at least 8"});
}

BOOST_AUTO_TEST_CASE(header_length_beyond_the_file) {
  require_rejected(le_u64(64) + "{}", {"header length 64", "runs past the end", "2 bytes"});
}

BOOST_AUTO_TEST_CASE(header_length_near_uint64_max) {
  require_rejected(le_u64(UINT64_MAX) + "{}", {"header length 18446744073709551615", "limit"});
  require_rejected(le_u64(UINT64_MAX - 7) + "{}", {"header length 18446744073709551608", "limit"});
  require_rejected(le_u64(io::kMaxHeaderBytes + 1) + "{}", {"100000001", "limit"});
}

BOOST_AUTO_TEST_CASE(header_not_json) {
  require_rejected(safetensors_bytes("not json", ""), {"not valid JSON"});
  require_rejected(safetensors_bytes("{\"a\":", ""), {"not valid JSON"});
  require_rejected(safetensors_bytes("[1,2]", ""), {"must be a JSON object", "array"});
  require_rejected(safetensors_bytes("{\"a\":\"\xff\xfe\"}", ""), {"not valid JSON"});  // invalid UTF-8
  require_rejected(safetensors_bytes("{}garbage", ""), {"not valid JSON"});
}

BOOST_AUTO_TEST_CASE(unknown_dtype) {
  const std::string header = "{" + tensor_json("w", "F8_E4M3", "[4]", 0, 4) + "}";
  require_rejected(safetensors_bytes(header, "abcd"), {"'w'", "F8_E4M3", "F64, F32"});
  require_rejected(safetensors_bytes(R"({"w":{"dtype":7,"shape":[1],"data_offsets":[0,1]}})", "a"), {"'w'", "dtype"});
  require_rejected(safetensors_bytes(R"({"w":{"shape":[1],"data_offsets":[0,1]}})", "a"), {"'w'", "dtype"});
}

BOOST_AUTO_TEST_CASE(shape_times_item_size_differs_from_the_range) {
  const std::string header = "{" + tensor_json("w", "F32", "[2,3]", 0, 20) + "}";
  require_rejected(safetensors_bytes(header, std::string(20, 'x')), {"'w'", "[2, 3]", "24 bytes", "[0, 20]", "span 20"});
}

BOOST_AUTO_TEST_CASE(shape_product_overflows) {
  const std::string header = "{" + tensor_json("w", "F64", "[4294967296,4294967296]", 0, 8) + "}";
  require_rejected(safetensors_bytes(header, std::string(8, 'x')), {"'w'", "overflows"});
}

BOOST_AUTO_TEST_CASE(negative_or_non_integer_shape) {
  require_rejected(safetensors_bytes("{" + tensor_json("w", "U8", "[-1]", 0, 0) + "}", ""), {"'w'", "-1", "non-negative"});
  require_rejected(safetensors_bytes("{" + tensor_json("w", "U8", "[1.5]", 0, 0) + "}", ""), {"'w'", "1.5"});
  require_rejected(safetensors_bytes("{" + tensor_json("w", "U8", "\"4\"", 0, 4) + "}", "abcd"), {"'w'", "shape"});
}

BOOST_AUTO_TEST_CASE(bad_data_offsets) {
  require_rejected(safetensors_bytes(R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[0]}})", "a"), {"'w'", "[begin, end]"});
  require_rejected(safetensors_bytes(R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[-1,0]}})", "a"), {"'w'", "data_offsets"});
  require_rejected(safetensors_bytes("{" + tensor_json("w", "U8", "[0]", 4, 2) + "}", "abcd"), {"'w'", "[4, 2]", "end before"});
}

BOOST_AUTO_TEST_CASE(offsets_out_of_range) {
  const std::string header = "{" + tensor_json("w", "U8", "[8]", 0, 8) + "}";
  require_rejected(safetensors_bytes(header, "abcd"), {"'w'", "[0, 8]", "past the data area", "4 bytes"});
  const std::string huge = "{" + tensor_json("w", "U8", "[0]", UINT64_MAX, UINT64_MAX) + "}";
  require_rejected(safetensors_bytes(huge, ""), {"'w'", "18446744073709551615", "past the data area"});
}

BOOST_AUTO_TEST_CASE(overlapping_ranges) {
  const std::string header = "{" + tensor_json("a", "U8", "[4]", 0, 4) + "," + tensor_json("b", "U8", "[4]", 2, 6) + "}";
  require_rejected(safetensors_bytes(header, "abcdef"), {"'a' [0, 4]", "'b' [2, 6]", "overlap"});
  const std::string same = "{" + tensor_json("a", "U8", "[4]", 0, 4) + "," + tensor_json("b", "U8", "[4]", 0, 4) + "}";
  require_rejected(safetensors_bytes(same, "abcd"), {"overlap"});
}

BOOST_AUTO_TEST_CASE(gaps_in_the_data_area) {
  const std::string gap = "{" + tensor_json("a", "U8", "[2]", 0, 2) + "," + tensor_json("b", "U8", "[2]", 4, 6) + "}";
  require_rejected(safetensors_bytes(gap, "abcdef"), {"bytes [2, 4)", "'b'", "belong to no tensor"});
  const std::string leading = "{" + tensor_json("a", "U8", "[2]", 2, 4) + "}";
  require_rejected(safetensors_bytes(leading, "abcd"), {"bytes [0, 2)", "'a'"});
  const std::string trailing = "{" + tensor_json("a", "U8", "[2]", 0, 2) + "}";
  require_rejected(safetensors_bytes(trailing, "abcd"), {"cover 2 bytes", "is 4 bytes"});
}

BOOST_AUTO_TEST_CASE(duplicate_names_and_bad_metadata) {
  const std::string twice = "{" + tensor_json("a", "U8", "[2]", 0, 2) + "," + tensor_json("a", "U8", "[2]", 2, 4) + "}";
  require_rejected(safetensors_bytes(twice, "abcd"), {"'a' twice"});
  require_rejected(safetensors_bytes(R"({"__metadata__":{"step":3}})", ""), {"'__metadata__'", "'step'", "string"});
  require_rejected(safetensors_bytes(R"({"__metadata__":[1]})", ""), {"'__metadata__'", "object"});
  require_rejected(safetensors_bytes(R"({"w":[1,2]})", ""), {"'w'", "object"});
}

BOOST_AUTO_TEST_CASE(valid_edge_cases_are_accepted) {
  ScratchDir dir;
  // Unpadded header, a zero-size tensor sharing an offset, a scalar, null metadata, unknown entry keys.
  const std::string header = R"({"__metadata__":null,"z":{"dtype":"F32","shape":[0],"data_offsets":[0,0]},)"
                             R"("s":{"dtype":"F32","shape":[],"data_offsets":[0,4],"extra":1}})";
  write_bytes(dir / "ok.safetensors", safetensors_bytes(header, std::string("\x00\x00\x80\x3f", 4)));
  const io::SafetensorsFile file(dir / "ok.safetensors");
  BOOST_TEST(file.tensors().size() == 2u);
  BOOST_TEST(io::to_f32(file.tensor("s")).at(0) == 1.0f);
  BOOST_TEST(file.tensor("z").nbytes == 0u);
  BOOST_TEST(file.metadata().empty());
}

// Deterministic mutation fuzzing: random byte flips, truncations and length prefixes over a valid file
// must each give a clean open or an hpctrain::Error, never a crash (run under ASan/UBSan to be sure).
BOOST_AUTO_TEST_CASE(mutated_files_fail_cleanly) {
  ScratchDir dir;
  const std::string floats = io::test::raw_bytes<float>({1, 2, 3, 4, 5, 6});
  io::save_safetensors(dir / "valid.safetensors",
                       {io::test::view_of("a.weight", io::DType::f32, {2, 2}, floats.substr(0, 16)),
                        io::test::view_of("b", io::DType::bf16, {4}, floats.substr(16, 8))},
                       {{"format", "pt"}});
  const std::string valid = io::test::read_bytes(dir / "valid.safetensors");
  std::mt19937_64 random(12345);
  int opened = 0;
  int rejected = 0;
  for (int round = 0; round < 600; ++round) {
    std::string bytes = valid;
    switch (round % 3) {
      case 0:  // flip 1-4 bytes anywhere
        for (int flips = 1 + static_cast<int>(random() % 4); flips > 0; --flips) {
          bytes[random() % bytes.size()] = static_cast<char>(random());
        }
        break;
      case 1:  // truncate
        bytes.resize(random() % bytes.size());
        break;
      default:  // a random header length
        bytes.replace(0, 8, le_u64(round % 2 ? random() : random() % (bytes.size() + 16)));
    }
    write_bytes(dir / "mutant.safetensors", bytes);
    try {
      const io::SafetensorsFile file(dir / "mutant.safetensors");
      for (const io::TensorView& tensor : file.tensors()) BOOST_REQUIRE(tensor.nbytes <= file.data_bytes());
      ++opened;
    } catch (const hpctrain::Error&) {
      ++rejected;
    }
  }
  BOOST_TEST_MESSAGE("mutants opened " << opened << ", rejected " << rejected);
  BOOST_TEST(rejected > 300);
}

BOOST_AUTO_TEST_CASE(not_a_regular_file) {
  ScratchDir dir;
  require_error([&] { io::SafetensorsFile file(dir.path()); }, {"not a regular file"});
  require_error([&] { io::SafetensorsFile file(dir / "missing.safetensors"); }, {"missing.safetensors", "cannot open"});
}

BOOST_AUTO_TEST_SUITE_END()
