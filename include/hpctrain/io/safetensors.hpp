// Safetensors files and Hugging Face weight folders, without LibTorch.
//
// - SafetensorsFile: a memory-mapped, fully validated file (the header is hostile input).
// - save_safetensors(): writes the bytes `safetensors.torch.save_file` writes (Note [DType order]).
// - SafetensorsCheckpoint / save_sharded(): a folder with `model.safetensors` or the sharded form
//   `model-00001-of-0000N.safetensors` + `model.safetensors.index.json`, as transformers writes it.
// - find_weights(): decides which of those a folder holds and refuses pickles (pytorch_model.bin).
// Not here: converting to torch::Tensor (models/), the training-checkpoint protocol.
#pragma once

#include "hpctrain/io/dtype.hpp"
#include "hpctrain/io/half.hpp"

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace hpctrain::io {

// The header's "__metadata__" (string -> string). transformers writes {"format": "pt"}. Written with
// keys sorted (the Rust writer uses a HashMap, so any order is valid); omitted when empty.
using Metadata = std::map<std::string, std::string>;

// Largest header accepted, in bytes (the Rust reference's MAX_HEADER_SIZE).
inline constexpr std::uint64_t kMaxHeaderBytes = 100'000'000;

// A read-only safetensors file. Every header field is validated before use: lengths (overflow-safe),
// JSON, dtypes, shapes, offsets inside the data area, no overlap, no gap, and the tensors covering the
// data area exactly (as HF's reader requires). Any violation throws Error naming file, tensor, numbers.
// Move-only; views stay valid across moves and until destruction.
class SafetensorsFile {
 public:
  explicit SafetensorsFile(const std::filesystem::path& path);
  ~SafetensorsFile();
  SafetensorsFile(SafetensorsFile&&) noexcept;
  SafetensorsFile& operator=(SafetensorsFile&&) noexcept;
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  [[nodiscard]] const std::filesystem::path& path() const { return path_; }
  [[nodiscard]] const Metadata& metadata() const { return metadata_; }
  // All tensors, in file (data offset) order.
  [[nodiscard]] const std::vector<TensorView>& tensors() const { return tensors_; }
  [[nodiscard]] bool contains(const std::string& name) const;
  // Error names the file and the tensor (and a few names that do exist) when absent.
  [[nodiscard]] const TensorView& tensor(const std::string& name) const;
  // Drops this process's resident pages of [data, data + bytes) when the range lies in the file's read-only mapping
  // (whole pages inside it; the page cache keeps them, a later read faults them back in); false, nothing done, when it
  // does not. For loaders that read a tensor once (Note [Quantized at load]).
  bool drop_pages(const void* data, std::size_t bytes) const;
  // Header length in bytes (the 8-byte prefix's value) and size of the data area.
  [[nodiscard]] std::uint64_t header_bytes() const { return header_bytes_; }
  [[nodiscard]] std::uint64_t data_bytes() const { return data_bytes_; }

 private:
  struct Mapping;
  std::filesystem::path path_;
  std::unique_ptr<Mapping> mapping_;
  Metadata metadata_;
  std::vector<TensorView> tensors_;
  std::map<std::string, std::size_t, std::less<>> index_;  // name -> position in tensors_
  std::uint64_t header_bytes_ = 0;
  std::uint64_t data_bytes_ = 0;
};

// Writes `tensors` (+ `metadata`) to `path` atomically (`path.tmp`, then rename; a file mapped from
// `path` stays valid). Layout and header bytes match safetensors' Python/Rust writer: tensors sorted by
// dtype descending then name (Note [DType order]), header keys "dtype", "shape", "data_offsets",
// compact JSON padded with spaces to a multiple of 8 bytes. Error on duplicate or reserved names, a
// negative dimension, or nbytes that does not match the shape.
void save_safetensors(const std::filesystem::path& path, const std::vector<TensorView>& tensors,
                      const Metadata& metadata = {});

// A writer may take each tensor's bytes only when it writes them (Note [Streamed writes] in
// src/train/streamed_save.cpp). data(i) gives the bytes
// of tensors[i] (its nbytes of them, valid until the next call); the views' own `data` is then not read. The
// writer asks for each tensor once, in the order it writes them (save_order / save_sharded_order say it
// beforehand, so that ranks that take part in producing the bytes can follow without writing).
using TensorData = std::function<const std::byte*(std::size_t index)>;
void save_safetensors(const std::filesystem::path& path, const std::vector<TensorView>& tensors,
                      const Metadata& metadata, const TensorData& data);
// The order save_safetensors writes (and asks data() for) `tensors`: dtype descending, then name.
[[nodiscard]] std::vector<std::size_t> save_order(const std::vector<TensorView>& tensors);

// ---- Hugging Face weight folders ----

inline constexpr const char* kSafeWeightsName = "model.safetensors";
inline constexpr const char* kSafeWeightsIndexName = "model.safetensors.index.json";
// transformers' default max_shard_size, "5GB" (powers of ten), in bytes.
inline constexpr std::uint64_t kDefaultMaxShardBytes = 5'000'000'000;

enum class WeightsLayout { single_file, sharded };
struct WeightsLocation {
  WeightsLayout layout = WeightsLayout::single_file;
  std::filesystem::path path;  // model.safetensors, or model.safetensors.index.json when sharded
};

// Which weights `dir` holds, in transformers' order of preference: model.safetensors, then the
// sharded index. A folder with only pytorch_model.bin (or its shards) is refused with an Error that
// says how to convert it once in Python; a folder with neither gets an Error listing what it has.
[[nodiscard]] WeightsLocation find_weights(const std::filesystem::path& dir);

// All tensors of a weights folder (single file or shards) as one name -> tensor map.
// Sharded: every shard the index names must exist (plain file names only), every tensor the index
// lists must be in its shard, and no tensor may be in two shards or in a shard the index does not
// assign it to. Move-only; views stay valid across moves.
class SafetensorsCheckpoint {
 public:
  [[nodiscard]] static SafetensorsCheckpoint open(const std::filesystem::path& dir);

  [[nodiscard]] const std::filesystem::path& dir() const { return dir_; }
  [[nodiscard]] WeightsLayout layout() const { return layout_; }
  [[nodiscard]] const std::vector<SafetensorsFile>& shards() const { return shards_; }
  // name -> tensor, sorted by name; pointers into shards().
  [[nodiscard]] const std::map<std::string, const TensorView*, std::less<>>& tensors() const { return tensors_; }
  [[nodiscard]] std::vector<std::string> names() const;
  [[nodiscard]] bool contains(const std::string& name) const;
  [[nodiscard]] const TensorView& tensor(const std::string& name) const;
  // SafetensorsFile::drop_pages on the shard whose mapping holds the range.
  bool drop_pages(const void* data, std::size_t bytes) const;

 private:
  std::filesystem::path dir_;
  WeightsLayout layout_ = WeightsLayout::single_file;
  std::vector<SafetensorsFile> shards_;
  std::map<std::string, const TensorView*, std::less<>> tensors_;
};

// Shard assignment (a pure function, as huggingface_hub's split_state_dict_into_shards_factory): walk
// tensors in order filling the current shard; a tensor that would push it past `max_shard_bytes` starts
// a new one; a tensor larger than `max_shard_bytes` alone gets its own shard, appended at once.
// Returns, per shard, the indices into `tensor_bytes` (bytes of each tensor). Empty input -> no shards.
[[nodiscard]] std::vector<std::vector<std::size_t>> plan_shards(const std::vector<std::uint64_t>& tensor_bytes,
                                                                std::uint64_t max_shard_bytes);

struct SavedWeights {
  WeightsLayout layout = WeightsLayout::single_file;
  std::vector<std::filesystem::path> files;  // every file written, index last
};

// Saves `tensors` into folder `dir` (created if missing) as transformers' save_pretrained does:
// one `model.safetensors` when everything fits in `max_shard_bytes` (per plan_shards), else shards
// `model-0000i-of-0000N.safetensors` + `model.safetensors.index.json` ({"metadata": {"total_parameters",
// "total_size"}, "weight_map"}, sorted keys, 2-space indent). `metadata` goes into every file. Stale
// weights from an earlier save (other shards, the other layout's file) are removed afterwards, so
// find_weights() sees only this save. Call it on one rank only.
SavedWeights save_sharded(const std::filesystem::path& dir, const std::vector<TensorView>& tensors,
                          const Metadata& metadata = {{"format", "pt"}},
                          std::uint64_t max_shard_bytes = kDefaultMaxShardBytes);
// As above, each tensor's bytes from data(i) (Note [Streamed writes]), asked in save_sharded_order's order.
SavedWeights save_sharded(const std::filesystem::path& dir, const std::vector<TensorView>& tensors,
                          const Metadata& metadata, std::uint64_t max_shard_bytes, const TensorData& data);
[[nodiscard]] std::vector<std::size_t> save_sharded_order(const std::vector<TensorView>& tensors,
                                                          std::uint64_t max_shard_bytes = kDefaultMaxShardBytes);

// "5GB" -> 5'000'000'000. Units are case-insensitive: B, KB, MB, GB, TB are powers of 10 (as
// huggingface_hub) and KiB, MiB, GiB, TiB powers of 2 (as transformers); no unit means bytes; a
// decimal value ("1.5GB") is truncated to whole bytes. Error on anything else or on overflow.
[[nodiscard]] std::uint64_t parse_size(std::string_view text);

}  // namespace hpctrain::io
