#include "hpctrain/ddp/consistency.hpp"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <cstring>

#include "hpctrain/core/error.hpp"

namespace hpctrain::ddp {
namespace {

// Tensors are packed into broadcast buffers of at most this many bytes; a larger tensor goes alone.
constexpr int64_t kBroadcastBufferBytes = int64_t{64} << 20;
// Offsets inside a packed buffer are rounded up to this, so every tensor's view is aligned.
constexpr int64_t kAlignBytes = 64;

int64_t align_up(int64_t bytes) { return (bytes + kAlignBytes - 1) / kAlignBytes * kAlignBytes; }

uint64_t rotate_left(uint64_t x, int bits) { return (x << bits) | (x >> (64 - bits)); }

// 64-bit checksum of a byte range (word-wise multiply-rotate with a final avalanche); not cryptographic.
uint64_t checksum_bytes(const uint8_t* data, std::size_t size) {
  uint64_t hash = 0x9E3779B97F4A7C15ull ^ (size * 0xff51afd7ed558ccdull);
  std::size_t i = 0;
  for (; i + 8 <= size; i += 8) {
    uint64_t word = 0;
    std::memcpy(&word, data + i, 8);
    hash = rotate_left(hash ^ (word * 0x87c37b91114253d5ull), 31) * 0x4cf5ad432745937full;
  }
  for (; i < size; ++i) hash = (hash ^ data[i]) * 0x100000001b3ull;
  hash ^= hash >> 33;
  hash *= 0xff51afd7ed558ccdull;
  hash ^= hash >> 33;
  hash *= 0xc4ceb9fe1a85ec53ull;
  return hash ^ (hash >> 33);
}

uint64_t checksum_tensor(const at::Tensor& tensor) {
  const at::Tensor bytes = tensor.detach().to(at::kCPU).contiguous();
  return checksum_bytes(static_cast<const uint8_t*>(bytes.data_ptr()), bytes.nbytes());
}

// ---- structure: (name, shape, dtype) entries, serialized to compare and to exchange on mismatch ----

struct Entry {
  std::string name;
  std::vector<int64_t> shape;
  int32_t dtype = 0;

  bool operator==(const Entry& other) const {
    return name == other.name && shape == other.shape && dtype == other.dtype;
  }
};

std::string describe(const Entry& entry) {
  return fmt::format("'{}' shape [{}] {}", entry.name, fmt::join(entry.shape, ", "),
                     c10::toString(static_cast<at::ScalarType>(entry.dtype)));
}

template <typename T>
void put(std::string& out, const T& value) {
  out.append(reinterpret_cast<const char*>(&value), sizeof(T));
}

template <typename T>
T take(const std::string& in, std::size_t& pos) {
  HPCTRAIN_CHECK(pos + sizeof(T) <= in.size(), "truncated structure description from another rank");
  T value;
  std::memcpy(&value, in.data() + pos, sizeof(T));
  pos += sizeof(T);
  return value;
}

std::string serialize(const std::vector<Entry>& entries) {
  std::string out;
  put<uint64_t>(out, entries.size());
  for (const Entry& entry : entries) {
    put<uint64_t>(out, entry.name.size());
    out += entry.name;
    put<uint64_t>(out, entry.shape.size());
    for (int64_t dim : entry.shape) put(out, dim);
    put(out, entry.dtype);
  }
  return out;
}

std::vector<Entry> deserialize(const std::string& in) {
  std::size_t pos = 0;
  std::vector<Entry> entries(take<uint64_t>(in, pos));
  for (Entry& entry : entries) {
    const auto name_size = take<uint64_t>(in, pos);
    HPCTRAIN_CHECK(name_size <= in.size() - pos, "truncated structure description from another rank");
    entry.name = in.substr(pos, name_size);
    pos += name_size;
    entry.shape.resize(take<uint64_t>(in, pos));
    for (int64_t& dim : entry.shape) dim = take<int64_t>(in, pos);
    entry.dtype = take<int32_t>(in, pos);
  }
  return entries;
}

// Says where two ranks' structures first differ.
std::string first_difference(const std::vector<Entry>& a, int rank_a, const std::vector<Entry>& b, int rank_b) {
  const std::size_t common = std::min(a.size(), b.size());
  for (std::size_t i = 0; i < common; ++i) {
    if (a[i] == b[i]) continue;
    return fmt::format("tensor #{} differs: rank {} has {}, rank {} has {}", i, rank_a, describe(a[i]), rank_b,
                       describe(b[i]));
  }
  const auto& longer = a.size() > b.size() ? a : b;
  return fmt::format("rank {} has {} tensors, rank {} has {}; the first extra one is {}", rank_a, a.size(), rank_b,
                     b.size(), describe(longer[common]));
}

}  // namespace

void broadcast_parameters(dist::Comm& comm, const std::vector<at::Tensor>& tensors, int root) {
  HPCTRAIN_CHECK(root >= 0 && root < comm.world_size(), "broadcast_parameters: root {} is not a rank of {}", root,
                 comm.world_size());
  int64_t total_bytes = 0;
  for (const at::Tensor& tensor : tensors) total_bytes += tensor.defined() ? tensor.nbytes() : 0;
  const auto totals = comm.allgather_value<std::pair<int64_t, int64_t>>({static_cast<int64_t>(tensors.size()), total_bytes});
  for (int rank = 0; rank < comm.world_size(); ++rank) {
    HPCTRAIN_CHECK(totals[rank] == totals[root],
                   "broadcast_parameters: rank {} has {} tensors of {} bytes in all, root rank {} has {} of {}; "
                   "every rank must build the same model (check with check_same_structure first)",
                   rank, totals[rank].first, totals[rank].second, root, totals[root].first, totals[root].second);
  }
  if (comm.world_size() == 1) return;

  at::NoGradGuard no_grad;
  const bool is_root = comm.rank() == root;
  // Packs tensors [first, last) into one buffer, broadcasts it, unpacks on the receivers.
  auto broadcast_group = [&](std::size_t first, std::size_t last, int64_t bytes) {
    const at::Tensor& single = tensors[first];
    if (last == first + 1 && single.defined() && single.device().is_cpu() && single.is_contiguous()) {
      comm.broadcast(single.data_ptr(), single.nbytes(), root);  // a tensor alone needs no packing
      return;
    }
    at::Tensor buffer = at::empty({bytes}, at::TensorOptions().dtype(at::kByte));
    auto* base = static_cast<uint8_t*>(buffer.data_ptr());
    int64_t offset = 0;
    for (std::size_t i = first; i < last; ++i) {
      const at::Tensor& tensor = tensors[i];
      if (!tensor.defined()) continue;
      if (is_root) {
        const at::Tensor cpu = tensor.detach().to(at::kCPU).contiguous();
        std::memcpy(base + offset, cpu.data_ptr(), cpu.nbytes());
      }
      offset = align_up(offset + tensor.nbytes());
    }
    comm.broadcast(base, static_cast<std::size_t>(bytes), root);
    if (is_root) return;
    offset = 0;
    for (std::size_t i = first; i < last; ++i) {
      const at::Tensor& tensor = tensors[i];
      if (!tensor.defined()) continue;
      tensor.copy_(at::from_blob(base + offset, tensor.sizes(), at::TensorOptions().dtype(tensor.scalar_type())));
      offset = align_up(offset + tensor.nbytes());
    }
  };

  std::size_t first = 0;
  int64_t group_bytes = 0;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const int64_t bytes = tensors[i].defined() ? align_up(tensors[i].nbytes()) : 0;
    if (group_bytes > 0 && group_bytes + bytes > kBroadcastBufferBytes) {
      broadcast_group(first, i, group_bytes);
      first = i;
      group_bytes = 0;
    }
    group_bytes += bytes;
  }
  if (first < tensors.size()) broadcast_group(first, tensors.size(), group_bytes);
}

void check_same_structure(dist::Comm& comm, const std::vector<std::string>& names,
                          const std::vector<std::vector<int64_t>>& shapes, const std::vector<at::ScalarType>& dtypes) {
  const bool bad_input = names.size() != shapes.size() || names.size() != dtypes.size();
  if (comm.any(bad_input)) {
    fail("check_same_structure: a rank passed different numbers of names, shapes and dtypes (expected equal "
         "counts; rank {} passed {}, {} and {})",
         comm.rank(), names.size(), shapes.size(), dtypes.size());
  }
  std::vector<Entry> entries(names.size());
  for (std::size_t i = 0; i < names.size(); ++i) entries[i] = {names[i], shapes[i], static_cast<int32_t>(dtypes[i])};
  std::string mine = serialize(entries);
  const auto hashes = comm.allgather_value<uint64_t>(checksum_bytes(reinterpret_cast<const uint8_t*>(mine.data()), mine.size()));

  int other = -1;
  for (int rank = 1; rank < comm.world_size() && other < 0; ++rank) {
    if (hashes[rank] != hashes[0]) other = rank;
  }
  if (other < 0) return;
  // Every rank learns rank 0's and the first different rank's lists, so all throw the same message.
  std::string reference = mine, different = mine;
  comm.broadcast_string(reference, 0);
  comm.broadcast_string(different, other);
  fail("the ranks built different models (parameter names, shapes or dtypes): {}. Every rank must load the same "
       "model and configuration",
       first_difference(deserialize(reference), 0, deserialize(different), other));
}

void check_same_structure(dist::Comm& comm, const NamedTensors& named_tensors) {
  std::vector<std::string> names;
  std::vector<std::vector<int64_t>> shapes;
  std::vector<at::ScalarType> dtypes;
  for (const auto& [name, tensor] : named_tensors) {
    names.push_back(name);
    shapes.push_back(tensor.defined() ? tensor.sizes().vec() : std::vector<int64_t>{});
    dtypes.push_back(tensor.defined() ? tensor.scalar_type() : at::ScalarType::Undefined);
  }
  check_same_structure(comm, names, shapes, dtypes);
}

std::string find_unsynchronized(dist::Comm& comm, const NamedTensors& named_tensors) {
  const auto counts = comm.allgather_value<uint64_t>(named_tensors.size());
  for (int rank = 1; rank < comm.world_size(); ++rank) {
    HPCTRAIN_CHECK(counts[rank] == counts[0], "find_unsynchronized: rank 0 passed {} tensors, rank {} passed {}",
                   counts[0], rank, counts[rank]);
  }
  const std::size_t count = named_tensors.size();
  std::vector<uint64_t> mine(count);
  for (std::size_t i = 0; i < count; ++i) {
    mine[i] = named_tensors[i].second.defined() ? checksum_tensor(named_tensors[i].second) : 0;
  }
  std::vector<uint64_t> all(count * static_cast<std::size_t>(comm.world_size()));
  if (count > 0) comm.allgather(mine.data(), count * sizeof(uint64_t), all.data());
  for (std::size_t i = 0; i < count; ++i) {
    for (int rank = 1; rank < comm.world_size(); ++rank) {
      if (all[static_cast<std::size_t>(rank) * count + i] != all[i]) return named_tensors[i].first;
    }
  }
  return "";
}

std::map<std::string, at::Tensor> broadcast_tensors(dist::Comm& comm, const std::map<std::string, at::Tensor>& tensors,
                                                    int root) {
  std::string header;
  if (comm.rank() == root) {
    nlohmann::json entries = nlohmann::json::array();
    for (const auto& [name, tensor] : tensors)
      entries.push_back({name, static_cast<int>(tensor.scalar_type()), tensor.sizes().vec()});
    header = entries.dump();
  }
  comm.broadcast_string(header, root);
  std::map<std::string, at::Tensor> out;
  std::vector<at::Tensor> order;
  for (const auto& entry : nlohmann::json::parse(header)) {
    const auto name = entry[0].get<std::string>();
    const auto dtype = static_cast<at::ScalarType>(entry[1].get<int>());
    at::Tensor tensor = comm.rank() == root ? tensors.at(name).detach().to(at::kCPU).contiguous()
                                            : at::empty(entry[2].get<std::vector<int64_t>>(), at::TensorOptions().dtype(dtype));
    order.push_back(tensor);
    out.emplace(name, std::move(tensor));
  }
  broadcast_parameters(comm, order, root);
  return out;
}

}  // namespace hpctrain::ddp
