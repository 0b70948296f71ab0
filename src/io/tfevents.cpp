// TensorBoard event files (tfevents.hpp): CRC32C from Boost.CRC, TFRecord framing, hand-encoded Event protobufs.
#include "hpctrain/io/tfevents.hpp"

#include <unistd.h>

#include <boost/crc.hpp>
#include <chrono>
#include <cstring>
#include <type_traits>
#include <fmt/format.h>

#include "hpctrain/core/error.hpp"

namespace hpctrain::io {
namespace {

namespace fs = std::filesystem;

constexpr int kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5;

template <typename T>
void append_little_endian(std::string& out, T value) {
  static_assert(std::is_unsigned_v<T>);
  for (size_t i = 0; i < sizeof(T); ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xFF));
}

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string host_name() {
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0) return "localhost";
  return name;
}

}  // namespace

uint32_t crc32c(std::string_view bytes) {
  boost::crc_optimal<32, 0x1EDC6F41, 0xFFFFFFFF, 0xFFFFFFFF, true, true> crc;
  crc.process_bytes(bytes.data(), bytes.size());
  return crc.checksum();
}

uint32_t masked_crc32c(std::string_view bytes) {
  const uint32_t crc = crc32c(bytes);
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8U;
}

void ProtoWriter::varint(uint64_t value) {
  while (value >= 0x80) {
    out_.push_back(static_cast<char>((value & 0x7F) | 0x80));
    value >>= 7;
  }
  out_.push_back(static_cast<char>(value));
}

void ProtoWriter::key(int field, int wire_type) { varint((static_cast<uint64_t>(field) << 3) | static_cast<uint64_t>(wire_type)); }

void ProtoWriter::add_varint(int field, uint64_t value) {
  key(field, kVarint);
  varint(value);
}

void ProtoWriter::add_double(int field, double value) {
  uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof(bits));
  key(field, kFixed64);
  append_little_endian(out_, bits);
}

void ProtoWriter::add_float(int field, float value) {
  uint32_t bits = 0;
  std::memcpy(&bits, &value, sizeof(bits));
  key(field, kFixed32);
  append_little_endian(out_, bits);
}

void ProtoWriter::add_bytes(int field, std::string_view data) {
  key(field, kLengthDelimited);
  varint(data.size());
  out_.append(data);
}

std::string tfrecord(std::string_view data) {
  std::string length;
  append_little_endian(length, static_cast<uint64_t>(data.size()));
  std::string record = length;
  append_little_endian(record, masked_crc32c(length));
  record.append(data);
  append_little_endian(record, masked_crc32c(data));
  return record;
}

std::string file_version_event(double wall_time) {
  ProtoWriter event;
  event.add_double(1, wall_time);
  event.add_bytes(3, "brain.Event:2");
  return event.bytes();
}

std::string scalars_event(double wall_time, int64_t step, const std::vector<Scalar>& scalars) {
  ProtoWriter summary;
  for (const auto& [tag, value] : scalars) {
    ProtoWriter entry;
    entry.add_bytes(1, tag);
    entry.add_float(2, static_cast<float>(value));
    summary.add_bytes(1, entry.bytes());
  }
  ProtoWriter event;
  event.add_double(1, wall_time);
  event.add_varint(2, static_cast<uint64_t>(step));
  event.add_bytes(5, summary.bytes());
  return event.bytes();
}

std::string session_start_event(double wall_time, int64_t step) {
  ProtoWriter session_log;
  session_log.add_varint(1, 1);  // SessionLog.status = START
  ProtoWriter event;
  event.add_double(1, wall_time);
  event.add_varint(2, static_cast<uint64_t>(step));
  event.add_bytes(7, session_log.bytes());
  return event.bytes();
}

std::string event_file_name(int64_t unix_seconds, const std::string& host, long pid, int n) {
  return fmt::format("events.out.tfevents.{:010d}.{}.{}.{}", unix_seconds, host, pid, n);
}

EventFileWriter::EventFileWriter(const fs::path& folder) {
  fs::create_directories(folder);
  const double wall_time = now_seconds();
  const std::string host = host_name();
  for (int n = 0; path_.empty() || fs::exists(path_); ++n)
    path_ = folder / event_file_name(static_cast<int64_t>(wall_time), host, static_cast<long>(::getpid()), n);
  file_.open(path_, std::ios::binary | std::ios::out);
  HPCTRAIN_CHECK(file_.good(), "--report-to tensorboard: cannot create the event file '{}'", path_.string());
  write(file_version_event(wall_time));
}

void EventFileWriter::add_scalars(int64_t step, const std::vector<Scalar>& scalars) {
  write(scalars_event(now_seconds(), step, scalars));
}

void EventFileWriter::add_session_start(int64_t step) { write(session_start_event(now_seconds(), step)); }

void EventFileWriter::write(const std::string& event) {
  file_ << tfrecord(event);
  file_.flush();
  HPCTRAIN_CHECK(file_.good(), "--report-to tensorboard: cannot write the event file '{}'", path_.string());
}

}  // namespace hpctrain::io
