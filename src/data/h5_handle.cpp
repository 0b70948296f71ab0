// The one translation unit that includes hdf5.h: identifier handles, attributes and row-wise dataset I/O.
#include "h5_handle.hpp"

#include <hdf5.h>

#include <algorithm>
#include <type_traits>

#include "hpctrain/core/error.hpp"

static_assert(std::is_same_v<hid_t, hpctrain::data::h5::Id>, "h5::Id must be hid_t (HDF5 >= 1.10)");

namespace hpctrain::data::h5 {
namespace {

// Chunk cache of each opened dataset: 256 chunks of the largest schema chunk (64 KiB), so nearby
// examples decompress their chunk once. Slots: a prime well above the number of chunks that fit.
constexpr size_t kChunkCacheBytes = 16u << 20;
constexpr size_t kChunkCacheSlots = 12421;

herr_t collect_error(unsigned depth, const H5E_error2_t* error, void* data) {
  auto* text = static_cast<std::string*>(data);
  if (!text->empty()) *text += "; ";
  std::string line = fmt::format("{}(): {}", error->func_name ? error->func_name : "?", error->desc ? error->desc : "?");
  std::replace(line.begin(), line.end(), '\n', ' ');
  *text += line;
  return depth < 4 ? 0 : 1;  // the innermost few frames say enough
}

std::string_view base_name(const char* path) {
  std::string_view text(path);
  const auto slash = text.find_last_of('/');
  return slash == std::string_view::npos ? text : text.substr(slash + 1);
}

hid_t memory_type(Type type) {
  switch (type) {
    case Type::u8: return H5T_NATIVE_UINT8;
    case Type::i32: return H5T_NATIVE_INT32;
    case Type::i64: return H5T_NATIVE_INT64;
    case Type::f64: return H5T_NATIVE_DOUBLE;
  }
  fail("unknown h5::Type");
}

// Files are written little-endian whatever the machine, so they are portable.
hid_t file_type(Type type) {
  switch (type) {
    case Type::u8: return H5T_STD_U8LE;
    case Type::i32: return H5T_STD_I32LE;
    case Type::i64: return H5T_STD_I64LE;
    case Type::f64: return H5T_IEEE_F64LE;
  }
  fail("unknown h5::Type");
}

std::string object_name(hid_t object) {
  const ssize_t length = HPCTRAIN_H5_CHECK(H5Iget_name(object, nullptr, 0));
  std::string name(static_cast<size_t>(length) + 1, '\0');
  HPCTRAIN_H5_CHECK(H5Iget_name(object, name.data(), name.size()));
  name.resize(static_cast<size_t>(length));
  return name;
}

std::vector<hsize_t> extent(hid_t space) {
  const int rank = HPCTRAIN_H5_CHECK(H5Sget_simple_extent_ndims(space));
  std::vector<hsize_t> dims(static_cast<size_t>(rank));
  HPCTRAIN_H5_CHECK(H5Sget_simple_extent_dims(space, dims.data(), nullptr));
  return dims;
}

// Opens `name` under `parent` as a generic object and checks its kind (group or dataset).
Handle open_object(Id parent, const std::string& name, H5I_type_t kind, const char* kind_name) {
  HPCTRAIN_CHECK(has_link(parent, name), "{}: no {} '{}'", describe_object(parent), kind_name, name);
  Handle object(HPCTRAIN_H5_CHECK(H5Oopen(parent, name.c_str(), H5P_DEFAULT)));
  HPCTRAIN_CHECK(H5Iget_type(object.get()) == kind, "{}: '{}' is not a {}", describe_object(parent), name, kind_name);
  return object;
}

Handle open_attribute(Id object, const std::string& name) {
  HPCTRAIN_CHECK(has_attribute(object, name), "{}: missing attribute '{}'", describe_object(object), name);
  return Handle(HPCTRAIN_H5_CHECK(H5Aopen(object, name.c_str(), H5P_DEFAULT)));
}

void replace_attribute(Id object, const std::string& name) {
  if (has_attribute(object, name)) HPCTRAIN_H5_CHECK(H5Adelete(object, name.c_str()));
}

}  // namespace

void prepare_thread() {
  thread_local bool silenced = false;
  if (!silenced) {
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    silenced = true;
  }
}

void throw_call_error(const char* expr, const char* file, int line) {
  std::string stack;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, collect_error, &stack);
  H5Eclear2(H5E_DEFAULT);
  fail("HDF5 call failed: {} ({}:{}): {}", expr, base_name(file), line, stack.empty() ? "no HDF5 error stack" : stack);
}

Handle& Handle::operator=(Handle&& other) noexcept {
  if (this != &other) {
    reset();
    id_ = other.id_;
    other.id_ = -1;
  }
  return *this;
}

void Handle::reset() noexcept {
  if (id_ < 0) return;
  prepare_thread();
  // A file closed with H5F_CLOSE_STRONG has already closed its objects; their ids are invalid then.
  if (H5Iis_valid(id_) > 0) H5Idec_ref(id_);
  id_ = -1;
}

std::string_view to_string(Type type) {
  switch (type) {
    case Type::u8: return "uint8";
    case Type::i32: return "int32";
    case Type::i64: return "int64";
    case Type::f64: return "float64";
  }
  return "?";
}

Handle create_file(const std::filesystem::path& path) {
  Handle access(HPCTRAIN_H5_CHECK(H5Pcreate(H5P_FILE_ACCESS)));
  HPCTRAIN_H5_CHECK(H5Pset_fclose_degree(access.get(), H5F_CLOSE_STRONG));
  const hid_t file = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, access.get());
  if (file < 0) {
    H5Eclear2(H5E_DEFAULT);
    fail("cannot create HDF5 file {} (check that the directory is writable)", path.string());
  }
  return Handle(file);
}

Handle open_file(const std::filesystem::path& path) {
  prepare_thread();
  std::error_code error;
  HPCTRAIN_CHECK(std::filesystem::is_regular_file(path, error), "{}: no such file", path.string());
  const htri_t is_hdf5 = H5Fis_hdf5(path.c_str());
  H5Eclear2(H5E_DEFAULT);
  HPCTRAIN_CHECK(is_hdf5 > 0, "{}: not an HDF5 file (expected a dataset file written by `hpctrain prep`)",
                 path.string());
  try {
    return Handle(HPCTRAIN_H5_CHECK(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT)));
  } catch (const Error& call_error) {
    fail("{}: cannot open the HDF5 file (truncated or damaged? rewrite it with `hpctrain prep`): {}", path.string(),
         call_error.what());
  }
}

Handle open_file_for_update(const std::filesystem::path& path) {
  prepare_thread();
  return Handle(HPCTRAIN_H5_CHECK(H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT)));
}

void close_file(Handle& file) {
  if (!file.valid()) return;
  HPCTRAIN_H5_CHECK(H5Fclose(file.release()));
}

Handle create_group(Id parent, const std::string& name) {
  return Handle(HPCTRAIN_H5_CHECK(H5Gcreate2(parent, name.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT)));
}

Handle open_group(Id parent, const std::string& name) { return open_object(parent, name, H5I_GROUP, "group"); }

bool has_link(Id parent, const std::string& name) {
  return HPCTRAIN_H5_CHECK(H5Lexists(parent, name.c_str(), H5P_DEFAULT)) > 0;
}

std::string describe_object(Id object) {
  prepare_thread();
  const ssize_t length = H5Fget_name(object, nullptr, 0);
  std::string file = "?";
  if (length >= 0) {
    file.assign(static_cast<size_t>(length) + 1, '\0');
    H5Fget_name(object, file.data(), file.size());
    file.resize(static_cast<size_t>(length));
  }
  return file + ":" + object_name(object);
}

bool has_attribute(Id object, const std::string& name) {
  return HPCTRAIN_H5_CHECK(H5Aexists(object, name.c_str())) > 0;
}

void write_string_attribute(Id object, const std::string& name, const std::string& value) {
  replace_attribute(object, name);
  Handle type(HPCTRAIN_H5_CHECK(H5Tcopy(H5T_C_S1)));
  HPCTRAIN_H5_CHECK(H5Tset_size(type.get(), H5T_VARIABLE));
  HPCTRAIN_H5_CHECK(H5Tset_cset(type.get(), H5T_CSET_UTF8));
  Handle space(HPCTRAIN_H5_CHECK(H5Screate(H5S_SCALAR)));
  Handle attribute(HPCTRAIN_H5_CHECK(H5Acreate2(object, name.c_str(), type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT)));
  const char* text = value.c_str();
  HPCTRAIN_H5_CHECK(H5Awrite(attribute.get(), type.get(), &text));
}

void write_int64_attribute(Id object, const std::string& name, int64_t value) {
  replace_attribute(object, name);
  Handle space(HPCTRAIN_H5_CHECK(H5Screate(H5S_SCALAR)));
  Handle attribute(HPCTRAIN_H5_CHECK(H5Acreate2(object, name.c_str(), H5T_STD_I64LE, space.get(), H5P_DEFAULT, H5P_DEFAULT)));
  HPCTRAIN_H5_CHECK(H5Awrite(attribute.get(), H5T_NATIVE_INT64, &value));
}

void write_doubles_attribute(Id object, const std::string& name, const std::vector<double>& values) {
  replace_attribute(object, name);
  const hsize_t count = values.size();
  Handle space(HPCTRAIN_H5_CHECK(H5Screate_simple(1, &count, nullptr)));
  Handle attribute(HPCTRAIN_H5_CHECK(H5Acreate2(object, name.c_str(), H5T_IEEE_F64LE, space.get(), H5P_DEFAULT, H5P_DEFAULT)));
  HPCTRAIN_H5_CHECK(H5Awrite(attribute.get(), H5T_NATIVE_DOUBLE, values.data()));
}

std::string read_string_attribute(Id object, const std::string& name) {
  Handle attribute = open_attribute(object, name);
  Handle type(HPCTRAIN_H5_CHECK(H5Aget_type(attribute.get())));
  Handle space(HPCTRAIN_H5_CHECK(H5Aget_space(attribute.get())));
  HPCTRAIN_CHECK(H5Tget_class(type.get()) == H5T_STRING && H5Sget_simple_extent_npoints(space.get()) == 1,
                 "{}: attribute '{}': expected one string, got another type or shape", describe_object(object), name);
  Handle memory(HPCTRAIN_H5_CHECK(H5Tcopy(H5T_C_S1)));
  HPCTRAIN_H5_CHECK(H5Tset_cset(memory.get(), H5Tget_cset(type.get())));
  if (HPCTRAIN_H5_CHECK(H5Tis_variable_str(type.get())) > 0) {
    HPCTRAIN_H5_CHECK(H5Tset_size(memory.get(), H5T_VARIABLE));
    char* text = nullptr;
    HPCTRAIN_H5_CHECK(H5Aread(attribute.get(), memory.get(), &text));
    std::string value = text ? text : "";
    H5free_memory(text);
    return value;
  }
  const size_t size = H5Tget_size(type.get());
  HPCTRAIN_H5_CHECK(H5Tset_size(memory.get(), size));
  std::string value(size, '\0');
  HPCTRAIN_H5_CHECK(H5Aread(attribute.get(), memory.get(), value.data()));
  value.resize(value.find_last_not_of('\0') + 1);  // fixed-length strings are NUL- or space-padded
  return value;
}

int64_t read_int64_attribute(Id object, const std::string& name) {
  Handle attribute = open_attribute(object, name);
  Handle type(HPCTRAIN_H5_CHECK(H5Aget_type(attribute.get())));
  Handle space(HPCTRAIN_H5_CHECK(H5Aget_space(attribute.get())));
  HPCTRAIN_CHECK(H5Tget_class(type.get()) == H5T_INTEGER && H5Sget_simple_extent_npoints(space.get()) == 1,
                 "{}: attribute '{}': expected one integer, got another type or shape", describe_object(object), name);
  int64_t value = 0;
  HPCTRAIN_H5_CHECK(H5Aread(attribute.get(), H5T_NATIVE_INT64, &value));
  return value;
}

std::vector<double> read_doubles_attribute(Id object, const std::string& name) {
  Handle attribute = open_attribute(object, name);
  Handle type(HPCTRAIN_H5_CHECK(H5Aget_type(attribute.get())));
  Handle space(HPCTRAIN_H5_CHECK(H5Aget_space(attribute.get())));
  const H5T_class_t type_class = H5Tget_class(type.get());
  HPCTRAIN_CHECK(type_class == H5T_FLOAT || type_class == H5T_INTEGER,
                 "{}: attribute '{}': expected numbers, got another type", describe_object(object), name);
  const hssize_t count = HPCTRAIN_H5_CHECK(H5Sget_simple_extent_npoints(space.get()));
  std::vector<double> values(static_cast<size_t>(count));
  if (count > 0) HPCTRAIN_H5_CHECK(H5Aread(attribute.get(), H5T_NATIVE_DOUBLE, values.data()));
  return values;
}

Handle create_rows_dataset(Id group, const std::string& name, Type type, const Layout& layout) {
  const int rank = static_cast<int>(layout.row_shape.size()) + 1;
  std::vector<hsize_t> dims(rank, 0), max_dims(rank, H5S_UNLIMITED), chunk(rank, 1);
  chunk[0] = static_cast<hsize_t>(layout.chunk_rows);
  for (int i = 1; i < rank; ++i) {
    dims[i] = max_dims[i] = chunk[i] = static_cast<hsize_t>(layout.row_shape[i - 1]);
  }
  Handle space(HPCTRAIN_H5_CHECK(H5Screate_simple(rank, dims.data(), max_dims.data())));
  Handle create(HPCTRAIN_H5_CHECK(H5Pcreate(H5P_DATASET_CREATE)));
  HPCTRAIN_H5_CHECK(H5Pset_chunk(create.get(), rank, chunk.data()));
  if (layout.compression == Compression::gzip) {
    if (size_of(type) > 1) HPCTRAIN_H5_CHECK(H5Pset_shuffle(create.get()));
    HPCTRAIN_H5_CHECK(H5Pset_deflate(create.get(), static_cast<unsigned>(layout.gzip_level)));
  }
  return Handle(HPCTRAIN_H5_CHECK(
      H5Dcreate2(group, name.c_str(), file_type(type), space.get(), H5P_DEFAULT, create.get(), H5P_DEFAULT)));
}

void append_rows(Id dataset, Type type, const void* data, int64_t rows, int64_t row_elements) {
  if (rows == 0) return;
  Handle old_space(HPCTRAIN_H5_CHECK(H5Dget_space(dataset)));
  std::vector<hsize_t> dims = extent(old_space.get());
  std::vector<hsize_t> start(dims.size(), 0), count = dims;
  start[0] = dims[0];
  count[0] = static_cast<hsize_t>(rows);
  dims[0] += static_cast<hsize_t>(rows);
  HPCTRAIN_H5_CHECK(H5Dset_extent(dataset, dims.data()));
  Handle file_space(HPCTRAIN_H5_CHECK(H5Dget_space(dataset)));
  HPCTRAIN_H5_CHECK(H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr));
  HPCTRAIN_CHECK(rows * row_elements == H5Sget_select_npoints(file_space.get()),
                 "appending rows of {} elements, the dataset's rows differ", row_elements);
  Handle memory_space(HPCTRAIN_H5_CHECK(H5Screate_simple(static_cast<int>(count.size()), count.data(), nullptr)));
  HPCTRAIN_H5_CHECK(H5Dwrite(dataset, memory_type(type), memory_space.get(), file_space.get(), H5P_DEFAULT, data));
}

std::size_t size_of(Type type) {
  switch (type) {
    case Type::u8: return 1;
    case Type::i32: return 4;
    case Type::i64: case Type::f64: return 8;
  }
  return 1;
}

void set_rows(Id dataset, int64_t rows) {
  Handle space(HPCTRAIN_H5_CHECK(H5Dget_space(dataset)));
  std::vector<hsize_t> dims = extent(space.get());
  dims[0] = static_cast<hsize_t>(rows);
  HPCTRAIN_H5_CHECK(H5Dset_extent(dataset, dims.data()));
}

void write_chunk(Id dataset, int64_t first_row, const void* bytes, std::size_t size) {
  const hsize_t offset[1] = {static_cast<hsize_t>(first_row)};
  HPCTRAIN_H5_CHECK(H5Dwrite_chunk(dataset, H5P_DEFAULT, /*filters: all applied*/ 0, offset, size, bytes));
}

std::string read_chunk(Id dataset, int64_t first_row) {
  const hsize_t offset[1] = {static_cast<hsize_t>(first_row)};
  hsize_t size = 0;
  HPCTRAIN_H5_CHECK(H5Dget_chunk_storage_size(dataset, offset, &size));
  std::string bytes(static_cast<std::size_t>(size), '\0');
  uint32_t filters = 0;
  HPCTRAIN_H5_CHECK(H5Dread_chunk(dataset, H5P_DEFAULT, offset, &filters, bytes.data()));
  return bytes;
}

Handle open_dataset(Id group, const std::string& name) {
  open_object(group, name, H5I_DATASET, "dataset");  // existence and kind, with a clear message
  Handle access(HPCTRAIN_H5_CHECK(H5Pcreate(H5P_DATASET_ACCESS)));
  HPCTRAIN_H5_CHECK(H5Pset_chunk_cache(access.get(), kChunkCacheSlots, kChunkCacheBytes, 0.75));
  return Handle(HPCTRAIN_H5_CHECK(H5Dopen2(group, name.c_str(), access.get())));
}

DatasetDescription describe_dataset(Id dataset) {
  DatasetDescription description;
  Handle type(HPCTRAIN_H5_CHECK(H5Dget_type(dataset)));
  const size_t bits = H5Tget_size(type.get()) * 8;
  switch (H5Tget_class(type.get())) {
    case H5T_INTEGER: {
      const bool is_signed = H5Tget_sign(type.get()) != H5T_SGN_NONE;
      description.type_name = fmt::format("{}int{}", is_signed ? "" : "u", bits);
      if (!is_signed && bits == 8) description.type = Type::u8;
      if (is_signed && bits == 32) description.type = Type::i32;
      if (is_signed && bits == 64) description.type = Type::i64;
      break;
    }
    case H5T_FLOAT:
      description.type_name = fmt::format("float{}", bits);
      if (bits == 64) description.type = Type::f64;
      break;
    case H5T_STRING: description.type_name = "string"; break;
    default: description.type_name = "a non-numeric HDF5 type"; break;
  }
  Handle space(HPCTRAIN_H5_CHECK(H5Dget_space(dataset)));
  for (hsize_t dim : extent(space.get())) description.dims.push_back(static_cast<int64_t>(dim));
  return description;
}

namespace {
// Selects rows [begin, end) in a dataset's `file_space` and returns a 1-D memory space of as many elements.
Handle select_rows(Id file_space, int64_t begin, int64_t end, int64_t row_elements) {
  const std::vector<hsize_t> dims = extent(file_space);
  std::vector<hsize_t> start(dims.size(), 0), count = dims;
  start[0] = static_cast<hsize_t>(begin);
  count[0] = static_cast<hsize_t>(end - begin);
  HPCTRAIN_H5_CHECK(H5Sselect_hyperslab(file_space, H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr));
  HPCTRAIN_CHECK((end - begin) * row_elements == H5Sget_select_npoints(file_space),
                 "rows of {} elements requested, the dataset's rows differ", row_elements);
  // The memory space has the selection's shape: HDF5 then copies whole chunks' rows at once (a 1-D memory
  // space against a 4-D selection falls back to one copy per innermost row, ~100x slower for images).
  return Handle(HPCTRAIN_H5_CHECK(H5Screate_simple(static_cast<int>(count.size()), count.data(), nullptr)));
}
}  // namespace

void write_rows(Id dataset, Type type, int64_t begin, int64_t end, int64_t row_elements, const void* data) {
  if (end <= begin) return;
  Handle file_space(HPCTRAIN_H5_CHECK(H5Dget_space(dataset)));
  Handle memory_space = select_rows(file_space.get(), begin, end, row_elements);
  HPCTRAIN_H5_CHECK(H5Dwrite(dataset, memory_type(type), memory_space.get(), file_space.get(), H5P_DEFAULT, data));
}

void read_rows(Id dataset, Type type, int64_t begin, int64_t end, int64_t row_elements, void* out) {
  if (end <= begin) return;
  try {
    Handle file_space(HPCTRAIN_H5_CHECK(H5Dget_space(dataset)));
    Handle memory_space = select_rows(file_space.get(), begin, end, row_elements);
    HPCTRAIN_H5_CHECK(H5Dread(dataset, memory_type(type), memory_space.get(), file_space.get(), H5P_DEFAULT, out));
  } catch (const Error& error) {
    fail("reading rows [{}, {}) of {}: {}", begin, end, describe_object(dataset), error.what());
  }
}

}  // namespace hpctrain::data::h5
