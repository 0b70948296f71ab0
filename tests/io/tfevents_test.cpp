// io/tfevents: CRC32C against published vectors, the protobuf wire encoding byte by byte, TFRecord framing,
// and an event file's records (the mpirun test reads whole files with independent readers).
#include <boost/test/unit_test.hpp>

#include <cstring>
#include <fstream>
#include <iterator>

#include "hpctrain/io/tfevents.hpp"
#include "io_test_util.hpp"

namespace io = hpctrain::io;
using hpctrain::io::test::ScratchDir;

namespace {

std::string bytes(std::initializer_list<int> values) {
  std::string out;
  for (int v : values) out.push_back(static_cast<char>(v));
  return out;
}

uint64_t read_u64(const std::string& s, size_t at) {
  uint64_t v = 0;
  for (size_t i = 0; i < 8; ++i) v |= static_cast<uint64_t>(static_cast<unsigned char>(s[at + i])) << (8 * i);
  return v;
}

uint32_t read_u32(const std::string& s, size_t at) { return static_cast<uint32_t>(read_u64(s + std::string(8, '\0'), at)); }

}  // namespace

BOOST_AUTO_TEST_SUITE(tfevents)

// RFC 3720 (iSCSI) B.4 and the common check value.
BOOST_AUTO_TEST_CASE(crc32c_known_vectors) {
  BOOST_TEST(io::crc32c("123456789") == 0xE3069283U);
  BOOST_TEST(io::crc32c("") == 0x00000000U);
  BOOST_TEST(io::crc32c(std::string(32, '\0')) == 0x8A9136AAU);
  BOOST_TEST(io::crc32c(std::string(32, '\xFF')) == 0x62A8AB43U);
  std::string ascending, descending;
  for (int i = 0; i < 32; ++i) ascending.push_back(static_cast<char>(i)), descending.push_back(static_cast<char>(31 - i));
  BOOST_TEST(io::crc32c(ascending) == 0x46DD794EU);
  BOOST_TEST(io::crc32c(descending) == 0x113FDB5CU);
}

BOOST_AUTO_TEST_CASE(masked_crc_rotates_and_adds) {
  const uint32_t crc = 0xE3069283U;
  BOOST_TEST(io::masked_crc32c("123456789") == static_cast<uint32_t>(((crc >> 15) | (crc << 17)) + 0xa282ead8U));
}

BOOST_AUTO_TEST_CASE(protobuf_wire_encoding) {
  io::ProtoWriter w;
  w.add_varint(1, 150);  // the protobuf documentation's example: 08 96 01
  BOOST_TEST(w.bytes() == bytes({0x08, 0x96, 0x01}));
  io::ProtoWriter big;
  big.add_varint(2, ~uint64_t{0});  // -1 as int64: ten bytes
  BOOST_TEST(big.bytes() == bytes({0x10, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01}));
  io::ProtoWriter text;
  text.add_bytes(2, "testing");  // 12 07 74 65 73 74 69 6e 67
  BOOST_TEST(text.bytes() == bytes({0x12, 0x07, 't', 'e', 's', 't', 'i', 'n', 'g'}));
  io::ProtoWriter fixed;
  fixed.add_double(1, 1.0);
  fixed.add_float(2, 1.0F);
  BOOST_TEST(fixed.bytes() == bytes({0x09, 0, 0, 0, 0, 0, 0, 0xF0, 0x3F, 0x15, 0, 0, 0x80, 0x3F}));
  io::ProtoWriter high_field;
  high_field.add_varint(16, 1);  // field numbers >= 16 need a two-byte key
  BOOST_TEST(high_field.bytes() == bytes({0x80, 0x01, 0x01}));
}

BOOST_AUTO_TEST_CASE(scalar_event_layout) {
  // Event{wall_time: 2.0, step: 3, summary{value{tag: "a", simple_value: 1.0}}}
  const std::string event = io::scalars_event(2.0, 3, {{"a", 1.0}});
  const std::string value = bytes({0x0A, 0x01, 'a', 0x15, 0, 0, 0x80, 0x3F});
  const std::string summary = bytes({0x0A, static_cast<int>(value.size())}) + value;
  BOOST_TEST(event == bytes({0x09, 0, 0, 0, 0, 0, 0, 0, 0x40, 0x10, 0x03, 0x2A, static_cast<int>(summary.size())}) + summary);
  BOOST_TEST(io::file_version_event(0.0) == bytes({0x09, 0, 0, 0, 0, 0, 0, 0, 0, 0x1A, 13}) + "brain.Event:2");
  BOOST_TEST(io::session_start_event(0.0, 5) == bytes({0x09, 0, 0, 0, 0, 0, 0, 0, 0, 0x10, 5, 0x3A, 2, 0x08, 1}));
}

BOOST_AUTO_TEST_CASE(tfrecord_framing) {
  const std::string record = io::tfrecord("hello");
  BOOST_TEST_REQUIRE(record.size() == 8 + 4 + 5 + 4);
  BOOST_TEST(read_u64(record, 0) == 5U);
  BOOST_TEST(read_u32(record, 8) == io::masked_crc32c(record.substr(0, 8)));
  BOOST_TEST(record.substr(12, 5) == "hello");
  BOOST_TEST(read_u32(record, 17) == io::masked_crc32c("hello"));
}

BOOST_AUTO_TEST_CASE(file_name_format) {
  BOOST_TEST(io::event_file_name(1700000000, "node7", 4242, 0) == "events.out.tfevents.1700000000.node7.4242.0");
  BOOST_TEST(io::event_file_name(12, "h", 1, 3) == "events.out.tfevents.0000000012.h.1.3");
}

BOOST_AUTO_TEST_CASE(writer_appends_flushed_records_and_never_overwrites) {
  ScratchDir dir;
  io::EventFileWriter first(dir / "runs");
  first.add_scalars(1, {{"train/loss", 0.5}});
  std::ifstream in(first.path(), std::ios::binary);  // flushed: readable while the writer is open
  const std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t version_size = io::file_version_event(0.0).size();
  BOOST_TEST_REQUIRE(content.size() > 16 + version_size);
  BOOST_TEST(read_u64(content, 0) == version_size);
  BOOST_TEST(content.find("brain.Event:2") == 12 + version_size - 13);
  BOOST_TEST(content.find("train/loss") != std::string::npos);
  io::EventFileWriter second(dir / "runs");  // same second, same pid: the next n
  BOOST_TEST(second.path() != first.path());
  BOOST_TEST(std::distance(std::filesystem::directory_iterator(dir / "runs"), {}) == 2);
}

BOOST_AUTO_TEST_SUITE_END()
