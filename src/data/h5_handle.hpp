// Private: RAII handles for HDF5 identifiers and the few typed HDF5 operations the dataset writer and
// reader need. Only h5_handle.cpp includes hdf5.h; everything here is spelled with plain types
// (h5::Id is hid_t, checked by a static_assert there), so callers never see the C API.
// Every HDF5 call goes through HPCTRAIN_H5_CHECK, which records the expression, file and line and the
// HDF5 error stack; helpers that touch a dataset add its file and path to the message.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hpctrain/data/dataset_schema.hpp"

namespace hpctrain::data::h5 {

using Id = int64_t;  // hid_t

// Turns HDF5's automatic error printing off on the calling thread (HDF5's error stacks are per thread).
void prepare_thread();
[[noreturn]] void throw_call_error(const char* expr, const char* file, int line);

template <typename T>
T checked(T value, const char* expr, const char* file, int line) {
  if (value < 0) throw_call_error(expr, file, line);
  return value;
}

}  // namespace hpctrain::data::h5

// Evaluates an HDF5 call and throws hpctrain::Error when it returns a negative value (herr_t, hid_t, htri_t).
#define HPCTRAIN_H5_CHECK(expr) \
  (::hpctrain::data::h5::prepare_thread(), ::hpctrain::data::h5::checked((expr), #expr, __FILE__, __LINE__))

namespace hpctrain::data::h5 {

// Owns one HDF5 identifier (file, group, dataset, dataspace, type, attribute, property list) and
// releases it with H5Idec_ref, which closes the object when the last reference goes.
class Handle {
 public:
  Handle() = default;
  explicit Handle(Id id) : id_(id) {}
  ~Handle() { reset(); }
  Handle(Handle&& other) noexcept : id_(other.id_) { other.id_ = -1; }
  Handle& operator=(Handle&& other) noexcept;
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;

  [[nodiscard]] Id get() const { return id_; }
  [[nodiscard]] bool valid() const { return id_ >= 0; }
  void reset() noexcept;
  // Gives up ownership without closing.
  [[nodiscard]] Id release() noexcept {
    const Id id = id_;
    id_ = -1;
    return id;
  }

 private:
  Id id_ = -1;
};

// In-memory element types used by the schema.
enum class Type { u8, i32, i64, f64 };
template <typename T> constexpr Type type_of();
template <> constexpr Type type_of<uint8_t>() { return Type::u8; }
template <> constexpr Type type_of<int32_t>() { return Type::i32; }
template <> constexpr Type type_of<int64_t>() { return Type::i64; }
template <> constexpr Type type_of<double>() { return Type::f64; }
[[nodiscard]] std::string_view to_string(Type type);

// ---- files, groups, links ----
// Creates (truncating) a file; objects still open when it is closed are closed with it.
[[nodiscard]] Handle create_file(const std::filesystem::path& path);
// Opens read-only. A missing file or a file that is not HDF5 throws an Error saying so.
[[nodiscard]] Handle open_file(const std::filesystem::path& path);
// Opens an existing file read-write (tests use it to corrupt files the writer made).
[[nodiscard]] Handle open_file_for_update(const std::filesystem::path& path);
// Closes a file now and reports failure (a handle's destructor cannot: use this where the data must be on disk).
void close_file(Handle& file);
[[nodiscard]] Handle create_group(Id parent, const std::string& name);
[[nodiscard]] Handle open_group(Id parent, const std::string& name);
[[nodiscard]] bool has_link(Id parent, const std::string& name);
// "<file>:<path inside the file>", for messages.
[[nodiscard]] std::string describe_object(Id object);

// ---- attributes ----
[[nodiscard]] bool has_attribute(Id object, const std::string& name);
// Variable-length UTF-8 string (h5py reads it as str).
void write_string_attribute(Id object, const std::string& name, const std::string& value);
void write_int64_attribute(Id object, const std::string& name, int64_t value);
void write_doubles_attribute(Id object, const std::string& name, const std::vector<double>& values);
// Readers accept fixed- or variable-length strings and any integer/float type HDF5 can convert.
[[nodiscard]] std::string read_string_attribute(Id object, const std::string& name);
[[nodiscard]] int64_t read_int64_attribute(Id object, const std::string& name);
[[nodiscard]] std::vector<double> read_doubles_attribute(Id object, const std::string& name);

// ---- datasets stored as rows along axis 0 ----
struct Layout {
  std::vector<int64_t> row_shape;  // dims after axis 0 (empty for 1-D datasets)
  int64_t chunk_rows = 1;          // rows per chunk
  Compression compression = Compression::none;
  int gzip_level = 4;
};
// Creates an empty dataset with an unlimited axis 0, chunked and optionally gzip (+ byte shuffle for
// multi-byte types: it groups the high bytes of small integers, which gzip then removes).
[[nodiscard]] Handle create_rows_dataset(Id group, const std::string& name, Type type, const Layout& layout);
// Extends axis 0 by `rows` and writes them (row_elements = product of row_shape).
void append_rows(Id dataset, Type type, const void* data, int64_t rows, int64_t row_elements);
// Bytes of one element of `type`.
[[nodiscard]] std::size_t size_of(Type type);
// Sets axis 0 of a chunked dataset to `rows` (growing or shrinking it).
void set_rows(Id dataset, int64_t rows);
// Stores one chunk's already filtered bytes (H5Dwrite_chunk) at row `first_row` of a 1-D chunked dataset,
// a multiple of its chunk rows and inside its extent (see ChunkWriter).
void write_chunk(Id dataset, int64_t first_row, const void* bytes, std::size_t size);
// The stored (filtered) bytes of the chunk at row `first_row` of a 1-D chunked dataset (H5Dread_chunk).
[[nodiscard]] std::string read_chunk(Id dataset, int64_t first_row);
// Opens a dataset with a chunk cache large enough for a few chunks of each schema dataset.
[[nodiscard]] Handle open_dataset(Id group, const std::string& name);

struct DatasetDescription {
  std::optional<Type> type;        // empty when the stored type is none of Type
  std::string type_name;           // e.g. "int32", "uint16", "float32", "string"
  std::vector<int64_t> dims;
};
[[nodiscard]] DatasetDescription describe_dataset(Id dataset);
// Overwrites rows [begin, end) of an existing dataset (tests use it to craft corrupt files).
void write_rows(Id dataset, Type type, int64_t begin, int64_t end, int64_t row_elements, const void* data);
// Reads rows [begin, end) into `out` (room for (end-begin)*row_elements elements of `type`).
// The caller checks bounds; HDF5 errors are reported with the dataset's file and path and the rows.
void read_rows(Id dataset, Type type, int64_t begin, int64_t end, int64_t row_elements, void* out);

}  // namespace hpctrain::data::h5
