// SafetensorsFile: map the file, then validate the header completely before exposing any tensor.
#include "hpctrain/core/error.hpp"
#include "hpctrain/io/safetensors.hpp"
#include "io/file_util.hpp"

#include <nlohmann/json.hpp>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <set>

#include <sys/mman.h>
#include <unistd.h>

namespace hpctrain::io {

struct SafetensorsFile::Mapping {
  detail::MappedFile file;
};

namespace {

using nlohmann::json;

// One header entry before layout checks; offsets are relative to the data area.
struct Entry {
  TensorView view;
  std::uint64_t begin = 0;
  std::uint64_t end = 0;
};

// Parses the header text; Error for invalid JSON, a non-object, or a name given twice (JSON parsers
// silently keep the last duplicate, which would hide a tensor).
json parse_header(std::string_view text, const std::string& file) {
  std::set<std::string> names;
  std::string duplicate;
  auto note_duplicates = [&](int depth, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::key && depth == 1 && parsed.is_string() &&
        !names.insert(parsed.get<std::string>()).second && duplicate.empty()) {
      duplicate = parsed.get<std::string>();
    }
    return true;
  };
  json header;
  try {
    header = json::parse(text.begin(), text.end(), note_duplicates);
  } catch (const json::exception& error) {
    fail("safetensors file '{}': the header ({} bytes) is not valid JSON: {}. Hint: the file is truncated, "
         "corrupt or not a safetensors file",
         file, text.size(), error.what());
  }
  HPCTRAIN_CHECK(header.is_object(), "safetensors file '{}': the header must be a JSON object, got {}", file,
                 header.type_name());
  HPCTRAIN_CHECK(duplicate.empty(), "safetensors file '{}': the header names '{}' twice; expected unique names",
                 file, duplicate);
  return header;
}

// A JSON value in an error message, shortened.
std::string excerpt(const json& value) {
  std::string text = value.dump(-1, ' ', false, json::error_handler_t::replace);
  if (text.size() > 80) text = text.substr(0, 77) + "...";
  return text;
}

bool is_non_negative_integer(const json& value) {
  return value.is_number_unsigned() || (value.is_number_integer() && value.get<std::int64_t>() >= 0);
}

Metadata parse_metadata(const json& value, const std::string& file) {
  Metadata metadata;
  if (value.is_null()) return metadata;  // the Rust reader accepts null as "no metadata"
  HPCTRAIN_CHECK(value.is_object(), "safetensors file '{}': '__metadata__' must be an object of strings, got {}",
                 file, excerpt(value));
  for (const auto& [key, text] : value.items()) {
    HPCTRAIN_CHECK(text.is_string(), "safetensors file '{}': '__metadata__' entry '{}' must be a string, got {}",
                   file, key, excerpt(text));
    metadata.emplace(key, text.get<std::string>());
  }
  return metadata;
}

std::vector<std::int64_t> parse_shape(const json& entry, const std::string& file, const std::string& name) {
  const auto found = entry.find("shape");
  HPCTRAIN_CHECK(found != entry.end(), "safetensors file '{}': tensor '{}' has no 'shape'", file, name);
  HPCTRAIN_CHECK(found->is_array(), "safetensors file '{}': tensor '{}': 'shape' must be an array of non-negative "
                 "integers, got {}", file, name, excerpt(*found));
  std::vector<std::int64_t> shape;
  for (const json& dim : *found) {
    HPCTRAIN_CHECK(is_non_negative_integer(dim) &&
                       dim.get<std::uint64_t>() <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()),
                   "safetensors file '{}': tensor '{}': shape {} has dimension {}; expected non-negative integers",
                   file, name, excerpt(*found), excerpt(dim));
    shape.push_back(dim.get<std::int64_t>());
  }
  return shape;
}

Entry parse_entry(const std::string& name, const json& entry, const std::string& file) {
  HPCTRAIN_CHECK(entry.is_object(), "safetensors file '{}': tensor '{}' must be an object with dtype, shape and "
                 "data_offsets, got {}", file, name, excerpt(entry));
  Entry out;
  out.view.name = name;

  const auto dtype = entry.find("dtype");
  HPCTRAIN_CHECK(dtype != entry.end() && dtype->is_string(), "safetensors file '{}': tensor '{}' needs a string "
                 "'dtype', got {}", file, name, dtype == entry.end() ? "none" : excerpt(*dtype));
  const auto parsed = parse_dtype(dtype->get<std::string>());
  HPCTRAIN_CHECK(parsed.has_value(), "safetensors file '{}': tensor '{}' has dtype {}; hpctrain reads {}. Hint: "
                 "convert it in Python first, e.g. tensor.to(torch.float32)", file, name, excerpt(*dtype),
                 supported_dtype_names());
  out.view.dtype = *parsed;
  out.view.shape = parse_shape(entry, file, name);

  const auto offsets = entry.find("data_offsets");
  HPCTRAIN_CHECK(offsets != entry.end() && offsets->is_array() && offsets->size() == 2 &&
                     is_non_negative_integer((*offsets)[0]) && is_non_negative_integer((*offsets)[1]),
                 "safetensors file '{}': tensor '{}': 'data_offsets' must be [begin, end] (non-negative integers), "
                 "got {}", file, name, offsets == entry.end() ? "none" : excerpt(*offsets));
  out.begin = (*offsets)[0].get<std::uint64_t>();
  out.end = (*offsets)[1].get<std::uint64_t>();
  HPCTRAIN_CHECK(out.begin <= out.end, "safetensors file '{}': tensor '{}': data_offsets [{}, {}] end before they "
                 "begin", file, name, out.begin, out.end);

  const auto expected = checked_nbytes(out.view.shape, out.view.dtype);
  HPCTRAIN_CHECK(expected.has_value(), "safetensors file '{}': tensor '{}': shape {} of {} overflows 64 bits",
                 file, name, shape_string(out.view.shape), dtype_name(out.view.dtype));
  HPCTRAIN_CHECK(*expected == out.end - out.begin, "safetensors file '{}': tensor '{}': shape {} of {} needs {} "
                 "bytes, but data_offsets [{}, {}] span {} bytes", file, name, shape_string(out.view.shape),
                 dtype_name(out.view.dtype), *expected, out.begin, out.end, out.end - out.begin);
  return out;
}

// Note [Tensors tile the data area]
// Sorted by offsets, each tensor must start where the previous one ended and the last must end at the
// end of the file: no overlap (two tensors aliasing bytes), no gap (bytes nobody owns, a classic place
// to hide a payload). This is HF's rule too (InvalidOffset / MetadataIncompleteBuffer), so a file we
// accept is one HF accepts.
void check_layout(std::vector<Entry>& entries, std::uint64_t data_bytes, const std::string& file) {
  for (const Entry& entry : entries) {
    HPCTRAIN_CHECK(entry.end <= data_bytes, "safetensors file '{}': tensor '{}': data_offsets [{}, {}] run past the "
                   "data area ({} bytes). Hint: the file is truncated", file, entry.view.name, entry.begin,
                   entry.end, data_bytes);
  }
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  std::uint64_t covered = 0;
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const Entry& entry = entries[i];
    HPCTRAIN_CHECK(entry.begin >= covered, "safetensors file '{}': tensors '{}' [{}, {}] and '{}' [{}, {}] overlap",
                   file, entries[i - 1].view.name, entries[i - 1].begin, entries[i - 1].end, entry.view.name,
                   entry.begin, entry.end);
    HPCTRAIN_CHECK(entry.begin == covered, "safetensors file '{}': bytes [{}, {}) of the data area belong to no "
                   "tensor (gap before '{}'); expected tensors to cover the data area exactly", file, covered,
                   entry.begin, entry.view.name);
    covered = entry.end;
  }
  HPCTRAIN_CHECK(covered == data_bytes, "safetensors file '{}': the tensors cover {} bytes but the data area is {} "
                 "bytes; expected them to cover it exactly (trailing bytes belong to no tensor)", file, covered,
                 data_bytes);
}

}  // namespace

SafetensorsFile::SafetensorsFile(const std::filesystem::path& path)
    : path_(path), mapping_(std::make_unique<Mapping>(Mapping{detail::MappedFile(path)})) {
  const std::string file = path.string();
  const std::byte* bytes = mapping_->file.data();
  const std::uint64_t file_bytes = mapping_->file.size();
  HPCTRAIN_CHECK(file_bytes >= 8, "safetensors file '{}' is {} bytes; expected at least 8 (the header length). "
                 "Hint: the file is truncated or empty", file, file_bytes);
  std::memcpy(&header_bytes_, bytes, 8);  // little-endian u64 (dtype.cpp asserts a little-endian host)
  HPCTRAIN_CHECK(header_bytes_ <= kMaxHeaderBytes, "safetensors file '{}': header length {} is above the {} byte "
                 "limit; expected a small JSON header. Hint: not a safetensors file?", file, header_bytes_,
                 kMaxHeaderBytes);
  HPCTRAIN_CHECK(header_bytes_ <= file_bytes - 8, "safetensors file '{}': header length {} runs past the end of "
                 "the file ({} bytes after the length). Hint: the file is truncated", file, header_bytes_,
                 file_bytes - 8);
  data_bytes_ = file_bytes - 8 - header_bytes_;

  const auto* header_text = reinterpret_cast<const char*>(bytes + 8);
  const json header = parse_header(std::string_view(header_text, header_bytes_), file);
  std::vector<Entry> entries;
  for (const auto& [name, value] : header.items()) {
    if (name == "__metadata__") {
      metadata_ = parse_metadata(value, file);
    } else {
      entries.push_back(parse_entry(name, value, file));
    }
  }
  check_layout(entries, data_bytes_, file);

  const std::byte* data_area = bytes + 8 + header_bytes_;
  tensors_.reserve(entries.size());
  for (Entry& entry : entries) {
    entry.view.data = data_area + entry.begin;
    entry.view.nbytes = entry.end - entry.begin;
    index_.emplace(entry.view.name, tensors_.size());
    tensors_.push_back(std::move(entry.view));
  }
}

SafetensorsFile::~SafetensorsFile() = default;
SafetensorsFile::SafetensorsFile(SafetensorsFile&&) noexcept = default;
SafetensorsFile& SafetensorsFile::operator=(SafetensorsFile&&) noexcept = default;

bool SafetensorsFile::contains(const std::string& name) const { return index_.count(name) > 0; }

const TensorView& SafetensorsFile::tensor(const std::string& name) const {
  const auto found = index_.find(name);
  if (found == index_.end()) {
    std::vector<std::string> some;
    for (const auto& [known, position] : index_) {
      if (some.size() == 5) break;
      some.push_back(known);
    }
    fail("safetensors file '{}' has no tensor '{}' ({} tensors, e.g. {})", path_.string(), name, index_.size(),
         fmt::join(some, ", "));
  }
  return tensors_[found->second];
}

bool SafetensorsFile::drop_pages(const void* data, std::size_t bytes) const {
  const auto* begin = static_cast<const std::byte*>(data);
  const std::byte* mapped = mapping_ ? mapping_->file.data() : nullptr;
  if (mapped == nullptr || begin < mapped || begin + bytes > mapped + mapping_->file.size()) return false;
  const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto first = (reinterpret_cast<std::uintptr_t>(begin) + page - 1) / page * page;
  const auto last = reinterpret_cast<std::uintptr_t>(begin + bytes) / page * page;
  if (last > first) (void)::madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);  // read-only: no loss
  return true;
}

bool SafetensorsCheckpoint::drop_pages(const void* data, std::size_t bytes) const {
  for (const SafetensorsFile& shard : shards_)
    if (shard.drop_pages(data, bytes)) return true;
  return false;
}

}  // namespace hpctrain::io
