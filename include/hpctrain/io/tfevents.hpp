// TensorBoard event files written by hand: CRC32C (Castagnoli), TFRecord framing, a tiny protobuf encoder and
// the Event/Summary messages of tensorflow/core/util/event.proto and summary.proto that scalars need.
// Not a protobuf library: only the wire types those messages use (varint, fixed64, fixed32, length-delimited).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace hpctrain::io {

// CRC32C (iSCSI polynomial 0x1EDC6F41, reflected, init and final xor 0xFFFFFFFF): crc32c("123456789") = 0xE3069283.
[[nodiscard]] uint32_t crc32c(std::string_view bytes);
// TFRecord's masked CRC: ((crc >> 15) | (crc << 17)) + 0xa282ead8, so a CRC of CRCs does not look like data.
[[nodiscard]] uint32_t masked_crc32c(std::string_view bytes);

// Protobuf wire format, appended field by field (field numbers as in the .proto; fields in the given order).
class ProtoWriter {
 public:
  void add_varint(int field, uint64_t value);       // wire type 0: int64, enum, bool
  void add_double(int field, double value);         // wire type 1: fixed64
  void add_float(int field, float value);           // wire type 5: fixed32
  void add_bytes(int field, std::string_view data);  // wire type 2: string, bytes, a nested message
  [[nodiscard]] const std::string& bytes() const { return out_; }

 private:
  void varint(uint64_t value);
  void key(int field, int wire_type);
  std::string out_;
};

// One TFRecord: uint64 length (little endian), masked CRC32C of those 8 bytes, the data, masked CRC32C of the data.
[[nodiscard]] std::string tfrecord(std::string_view data);

// Serialized Event messages (Event: wall_time = 1 double, step = 2 int64, file_version = 3, summary = 5,
// session_log = 7; Summary: repeated value = 1; Summary.Value: tag = 1, simple_value = 2 float).
using Scalar = std::pair<std::string, double>;  // tag, value (stored as float, as TensorBoard's simple_value)
[[nodiscard]] std::string file_version_event(double wall_time);  // file_version "brain.Event:2"
[[nodiscard]] std::string scalars_event(double wall_time, int64_t step, const std::vector<Scalar>& scalars);
// SessionLog{status: START} at `step`: TensorBoard drops the values logged at step >= `step` by earlier files
// (what a resumed run recomputes), as PyTorch's SummaryWriter(purge_step=...) does.
[[nodiscard]] std::string session_start_event(double wall_time, int64_t step);

// "events.out.tfevents.<seconds, 10 digits>.<host>.<pid>.<n>", the name TensorBoard and SummaryWriter use.
[[nodiscard]] std::string event_file_name(int64_t unix_seconds, const std::string& host, long pid, int n);

// A new event file in `folder` (created) starting with the file_version event; each add_* writes one record
// and flushes it, so a crash keeps everything logged so far. An existing file is never overwritten.
class EventFileWriter {
 public:
  explicit EventFileWriter(const std::filesystem::path& folder);
  void add_scalars(int64_t step, const std::vector<Scalar>& scalars);
  void add_session_start(int64_t step);
  [[nodiscard]] const std::filesystem::path& path() const { return path_; }

 private:
  void write(const std::string& event);
  std::filesystem::path path_;
  std::ofstream file_;
};

}  // namespace hpctrain::io
