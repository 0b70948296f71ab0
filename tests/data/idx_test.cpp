// IDX reading: round trips (plain and gzip), hostile headers, length mismatches, and the real Fashion-MNIST files.
#include <boost/test/unit_test.hpp>

#include <array>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "fixtures.hpp"
#include "hpctrain/data/idx.hpp"
#include "text_helpers.hpp"

using namespace hpctrain::data;
using namespace sources_test;

namespace {

IdxArray random_array(std::vector<std::int64_t> dims, unsigned seed) {
  IdxArray array;
  array.dims = std::move(dims);
  std::size_t count = 1;
  for (const auto dim : array.dims) count *= static_cast<std::size_t>(dim);
  std::mt19937 rng(seed);
  for (std::size_t i = 0; i < count; ++i) array.data.push_back(static_cast<std::uint8_t>(rng()));
  return array;
}

// Header bytes 00 00 <dtype> <ndim> and big-endian dims.
std::string idx_header(std::uint8_t dtype, const std::vector<std::uint32_t>& dims) {
  std::string header = {0, 0, static_cast<char>(dtype), static_cast<char>(dims.size())};
  for (const auto dim : dims) {
    for (int shift = 24; shift >= 0; shift -= 8) header.push_back(static_cast<char>((dim >> shift) & 0xff));
  }
  return header;
}

const std::filesystem::path kFashionMnist = "/usr/share/datasets/fashion-mnist";

boost::test_tools::assertion_result fashion_mnist_present(boost::unit_test::test_unit_id) {
  boost::test_tools::assertion_result present = std::filesystem::exists(kFashionMnist / "train-images-idx3-ubyte.gz");
  present.message() << "skipped: " << kFashionMnist.string() << " is not on this machine";
  return present;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(idx)

BOOST_AUTO_TEST_CASE(round_trip_plain_and_gzip) {
  TempDir dir;
  const IdxArray original = random_array({7, 5, 3}, 42);
  const auto plain = dir / "images-idx3-ubyte";
  write_idx_u8(plain, original);
  BOOST_TEST(std::filesystem::file_size(plain) == 4u + 3 * 4 + 105);

  const auto gzip = dir / "images-idx3-ubyte.gz";
  write_gzip(gzip, read_file(plain));
  // Detection is by magic bytes: a gzip file without the .gz name reads the same.
  const auto gzip_unnamed = dir / "images-gz-without-extension";
  std::filesystem::copy_file(gzip, gzip_unnamed);

  for (const auto& path : {plain, gzip, gzip_unnamed}) {
    BOOST_TEST_CONTEXT(path.filename()) {
      const IdxArray read = read_idx_u8(path);
      BOOST_TEST(read.dims == original.dims, tt::per_element());
      BOOST_TEST(read.data == original.data, tt::per_element());
    }
  }
}

BOOST_AUTO_TEST_CASE(empty_dimension_reads_as_empty_data) {
  TempDir dir;
  const auto path = dir / "empty-idx";
  write_file(path, idx_header(0x08, {0, 28}));
  const IdxArray read = read_idx_u8(path);
  BOOST_TEST(read.dims == (std::vector<std::int64_t>{0, 28}), tt::per_element());
  BOOST_TEST(read.data.empty());
}

BOOST_AUTO_TEST_CASE(bad_magic_and_unsupported_dtype) {
  TempDir dir;
  const auto not_idx = dir / "not-idx";
  write_file(not_idx, "PK\x03\x04 this is a zip");
  std::string message = error_of([&] { (void)read_idx_u8(not_idx); });
  BOOST_TEST_INFO("message: " << message);
  BOOST_TEST(contains(message, "is not an IDX file"));
  BOOST_TEST(contains(message, "got 50 4b 03 04"));

  const auto floats = dir / "floats-idx";
  write_file(floats, idx_header(0x0D, {2}) + std::string(8, '\0'));
  message = error_of([&] { (void)read_idx_u8(floats); });
  BOOST_TEST_INFO("message: " << message);
  BOOST_TEST(contains(message, "dtype code 0x0D (float (float32))"));
  BOOST_TEST(contains(message, "only 0x08"));

  const auto short_file = dir / "short-idx";
  write_file(short_file, std::string("\0\0", 2));
  message = error_of([&] { (void)read_idx_u8(short_file); });
  BOOST_TEST(contains(message, "too short"));
}

BOOST_AUTO_TEST_CASE(truncated_data_and_trailing_bytes_report_both_counts) {
  TempDir dir;
  const std::string header = idx_header(0x08, {10, 4});
  const auto truncated = dir / "truncated-idx";
  write_file(truncated, header + std::string(39, 'x'));
  std::string message = error_of([&] { (void)read_idx_u8(truncated); });
  BOOST_TEST_INFO("message: " << message);
  BOOST_TEST(contains(message, "is truncated"));
  BOOST_TEST(contains(message, "need 40 data bytes after the 12-byte header, got 39"));

  const auto trailing = dir / "trailing-idx.gz";
  write_gzip(trailing, header + std::string(43, 'x'));
  message = error_of([&] { (void)read_idx_u8(trailing); });
  BOOST_TEST_INFO("message: " << message);
  BOOST_TEST(contains(message, "3 trailing bytes"));
  BOOST_TEST(contains(message, "need 40 data bytes after the 12-byte header, got 43"));

  const auto short_header = dir / "short-header-idx";
  write_file(short_header, idx_header(0x08, {10, 4}).substr(0, 9));
  message = error_of([&] { (void)read_idx_u8(short_header); });
  BOOST_TEST(contains(message, "truncated in its header"));
}

BOOST_AUTO_TEST_CASE(overflowing_dimensions_are_rejected_before_allocating) {
  TempDir dir;
  const auto path = dir / "huge-idx";
  write_file(path, idx_header(0x08, {0xffffffffu, 0xffffffffu, 0xffffffffu}) + "abc");
  const std::string message = error_of([&] { (void)read_idx_u8(path); });
  BOOST_TEST_INFO("message: " << message);
  BOOST_TEST(contains(message, "overflows"));

  // Large but representable: must fail as truncated, without trying to allocate 16 GiB first.
  const auto big = dir / "big-idx";
  write_file(big, idx_header(0x08, {65536, 65536, 4}) + "abc");
  const std::string big_message = error_of([&] { (void)read_idx_u8(big); });
  BOOST_TEST_INFO("message: " << big_message);
  BOOST_TEST(contains(big_message, "got 3"));
}

BOOST_AUTO_TEST_CASE(fashion_mnist_labels_and_images, *boost::unit_test::precondition(fashion_mnist_present)) {
  const IdxArray labels = read_idx_u8(kFashionMnist / "train-labels-idx1-ubyte.gz");
  BOOST_TEST(labels.dims == (std::vector<std::int64_t>{60000}), tt::per_element());
  BOOST_TEST_REQUIRE(labels.data.size() == 60000u);
  std::array<int, 10> per_class{};
  for (const auto label : labels.data) {
    BOOST_TEST_REQUIRE(label < 10);
    ++per_class[label];
  }
  for (const int count : per_class) BOOST_TEST(count == 6000);  // Fashion-MNIST is balanced

  const IdxArray images = read_idx_u8(kFashionMnist / "t10k-images-idx3-ubyte.gz");
  BOOST_TEST(images.dims == (std::vector<std::int64_t>{10000, 28, 28}), tt::per_element());
  BOOST_TEST(images.data.size() == 10000u * 28 * 28);
}

BOOST_AUTO_TEST_SUITE_END()
