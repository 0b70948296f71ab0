// save_safetensors(): the bytes safetensors' own writer produces (see Note [DType order]).
#include "hpctrain/core/error.hpp"
#include "hpctrain/io/safetensors.hpp"
#include "io/file_util.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <numeric>
#include <set>

namespace hpctrain::io {
namespace {

using ordered_json = nlohmann::ordered_json;

void check_utf8(const std::string& text, const std::string& file, std::string_view what) {
  try {
    (void)nlohmann::json(text).dump();
  } catch (const nlohmann::json::exception&) {
    fail("cannot write safetensors file '{}': {} '{}' is not valid UTF-8; JSON headers need UTF-8", file, what,
         text);
  }
}

void check_tensors(const std::vector<TensorView>& tensors, const Metadata& metadata, const std::string& file,
                   bool streamed) {
  std::set<std::string_view> names;
  for (const TensorView& tensor : tensors) {
    HPCTRAIN_CHECK(tensor.name != "__metadata__", "cannot write safetensors file '{}': '__metadata__' is reserved "
                   "for the header's metadata; rename the tensor", file);
    HPCTRAIN_CHECK(names.insert(tensor.name).second, "cannot write safetensors file '{}': tensor '{}' is given "
                   "twice; expected unique names", file, tensor.name);
    check_utf8(tensor.name, file, "tensor name");
    const auto expected = checked_nbytes(tensor.shape, tensor.dtype);
    HPCTRAIN_CHECK(expected.has_value(), "cannot write safetensors file '{}': tensor '{}' has shape {}; expected "
                   "non-negative dimensions whose product fits in 64 bits", file, tensor.name,
                   shape_string(tensor.shape));
    HPCTRAIN_CHECK(*expected == tensor.nbytes, "cannot write safetensors file '{}': tensor '{}' has shape {} of {} "
                   "({} bytes) but {} bytes of data", file, tensor.name, shape_string(tensor.shape),
                   dtype_name(tensor.dtype), *expected, tensor.nbytes);
    HPCTRAIN_CHECK(streamed || tensor.data != nullptr || tensor.nbytes == 0, "cannot write safetensors file '{}': "
                   "tensor '{}' has {} bytes but no data pointer", file, tensor.name, tensor.nbytes);
  }
  for (const auto& [key, value] : metadata) {
    check_utf8(key, file, "metadata key");
    check_utf8(value, file, "metadata value");
  }
}

// The order tensors are laid out in: dtype descending (Note [DType order]), then name (bytewise, as
// Rust's String ordering).
std::vector<std::size_t> layout_order(const std::vector<TensorView>& tensors) {
  std::vector<std::size_t> order(tensors.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    if (tensors[a].dtype != tensors[b].dtype) return tensors[a].dtype > tensors[b].dtype;
    return tensors[a].name < tensors[b].name;
  });
  return order;
}

// Compact JSON (serde_json::to_string spelling: no spaces, UTF-8 unescaped), padded with spaces to a
// multiple of 8 bytes so the data area starts 8-aligned.
std::string header_text(const std::vector<TensorView>& tensors, const std::vector<std::size_t>& order,
                        const Metadata& metadata) {
  ordered_json header = ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::size_t offset = 0;
  for (const std::size_t i : order) {
    const TensorView& tensor = tensors[i];
    ordered_json entry = ordered_json::object();
    entry["dtype"] = dtype_name(tensor.dtype);
    entry["shape"] = tensor.shape;
    entry["data_offsets"] = {offset, offset + tensor.nbytes};
    header[tensor.name] = std::move(entry);
    offset += tensor.nbytes;
  }
  std::string text = header.dump();
  text.resize((text.size() + 7) / 8 * 8, ' ');
  return text;
}

}  // namespace

void save_safetensors(const std::filesystem::path& path, const std::vector<TensorView>& tensors,
                      const Metadata& metadata) {
  save_safetensors(path, tensors, metadata, TensorData{});
}

std::vector<std::size_t> save_order(const std::vector<TensorView>& tensors) { return layout_order(tensors); }

void save_safetensors(const std::filesystem::path& path, const std::vector<TensorView>& tensors,
                      const Metadata& metadata, const TensorData& data) {
  const std::string file = path.string();
  check_tensors(tensors, metadata, file, static_cast<bool>(data));
  const std::vector<std::size_t> order = layout_order(tensors);
  const std::string header = header_text(tensors, order, metadata);
  HPCTRAIN_CHECK(header.size() <= kMaxHeaderBytes, "cannot write safetensors file '{}': the header would be {} "
                 "bytes, above the {} byte limit readers accept; split the tensors over several files", file,
                 header.size(), kMaxHeaderBytes);

  const std::uint64_t header_length = header.size();  // written little-endian (little-endian host)
  detail::AtomicFile out(path);
  out.write(&header_length, sizeof header_length);
  out.write(header.data(), header.size());
  for (const std::size_t i : order) {
    const std::byte* bytes = data ? data(i) : tensors[i].data;  // Note [Streamed writes]: asked even when empty
    HPCTRAIN_CHECK(bytes != nullptr || tensors[i].nbytes == 0, "cannot write safetensors file '{}': tensor '{}' has "
                   "{} bytes but no data", file, tensors[i].name, tensors[i].nbytes);
    if (tensors[i].nbytes > 0) out.write(bytes, tensors[i].nbytes);
  }
  out.commit();
}

}  // namespace hpctrain::io
