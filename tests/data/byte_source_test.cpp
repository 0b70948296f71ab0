// ByteSource: magic-byte detection, exact-length reads, concatenated gzip members, corrupt and truncated gzip.
#include <boost/test/unit_test.hpp>

#include <string>
#include <vector>

#include "fixtures.hpp"
#include "hpctrain/data/byte_source.hpp"
#include "text_helpers.hpp"

using namespace hpctrain::data;
using namespace sources_test;

namespace {

std::string read_everything(ByteSource& source, std::size_t chunk) {
  std::string out;
  std::vector<char> buffer(chunk);
  for (;;) {
    const std::size_t got = source.read(buffer.data(), buffer.size());
    out.append(buffer.data(), got);
    if (got < buffer.size()) break;  // a short read means the end
  }
  BOOST_TEST(source.read(buffer.data(), buffer.size()) == 0u);
  return out;
}

std::string sample_text(std::size_t bytes) {
  std::string text;
  for (std::size_t i = 0; text.size() < bytes; ++i) text += "line " + std::to_string(i * 7919 % 10007) + "\n";
  text.resize(bytes);
  return text;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(byte_source)

BOOST_AUTO_TEST_CASE(plain_and_gzip_detected_by_magic_not_name) {
  TempDir dir;
  const std::string text = sample_text(300000);
  const auto gzip_named_plain = dir / "misnamed.csv";
  const auto plain_named_gzip = dir / "misnamed.csv.gz";
  write_gzip(gzip_named_plain, text);
  write_file(plain_named_gzip, text);

  ByteSource gz(gzip_named_plain, 4096);
  BOOST_TEST(gz.is_gzip());
  BOOST_TEST(read_everything(gz, 1000) == text);
  BOOST_TEST(gz.bytes_consumed() == gz.file_size());
  BOOST_TEST(gz.file_size() < text.size());

  ByteSource plain(plain_named_gzip, 4096);
  BOOST_TEST(!plain.is_gzip());
  BOOST_TEST(read_everything(plain, 333) == text);
  BOOST_TEST(plain.bytes_consumed() == text.size());
}

BOOST_AUTO_TEST_CASE(concatenated_gzip_members_read_as_one_stream) {
  TempDir dir;
  const auto path = dir / "two-members.gz";
  write_gzip(path, "first member\n");
  write_gzip(path, "second member\n", "ab");
  ByteSource source(path, 16);
  BOOST_TEST(read_everything(source, 5) == "first member\nsecond member\n");
}

BOOST_AUTO_TEST_CASE(tiny_and_empty_files) {
  TempDir dir;
  const auto empty = dir / "empty";
  write_file(empty, "");
  ByteSource empty_source(empty);
  BOOST_TEST(read_everything(empty_source, 8) == "");
  const auto one = dir / "one";
  write_file(one, "\x1f");  // half a gzip magic: plain
  ByteSource one_source(one);
  BOOST_TEST(!one_source.is_gzip());
  BOOST_TEST(read_everything(one_source, 8) == "\x1f");
}

BOOST_AUTO_TEST_CASE(truncated_and_corrupt_gzip_are_errors) {
  TempDir dir;
  const auto whole = dir / "whole.gz";
  write_gzip(whole, sample_text(200000));
  const std::string compressed = read_file(whole);

  const auto truncated = dir / "truncated.gz";
  write_file(truncated, compressed.substr(0, compressed.size() / 2));
  std::string message = error_of([&] {
    ByteSource source(truncated, 1024);
    (void)read_everything(source, 4096);
  });
  BOOST_TEST_INFO("message: " << message);
  BOOST_TEST(contains(message, "is truncated"));

  std::string damaged = compressed;
  for (std::size_t i = 100; i < 200; ++i) damaged[i] = static_cast<char>(damaged[i] ^ 0x5a);
  const auto corrupt = dir / "corrupt.gz";
  write_file(corrupt, damaged);
  message = error_of([&] {
    ByteSource source(corrupt, 1024);
    (void)read_everything(source, 4096);
  });
  BOOST_TEST_INFO("message: " << message);
  BOOST_TEST(contains(message, "corrupt gzip data"));

  const auto missing = dir / "missing.gz";
  message = error_of([&] { ByteSource source(missing); });
  BOOST_TEST(contains(message, "cannot open"));
}

BOOST_AUTO_TEST_SUITE_END()
