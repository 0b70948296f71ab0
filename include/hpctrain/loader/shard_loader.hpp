// The training data path: this rank's examples of one split of an HDF5 dataset file, as prefetched
// micro-batches. Which examples and in which order is data/sampler.hpp's business (Note [Sampler
// partition]); this class reads them, collates them and keeps a background thread ahead of the trainer.
//
// Reading (see docs/hdf5-format.md, "How the loader reads"):
//  - shard/none mode: only this rank's shard is read. If it fits in cache_bytes it is read once at
//    construction and kept across epochs; otherwise it is streamed in blocks of about cache_bytes / 2
//    and the within-shard shuffle becomes a block shuffle (block order permuted, then positions within
//    each block), so every block is read once per epoch. The shard-mode order thus depends on whether
//    (and in how many blocks) the shard streams: resuming mid-epoch needs the same cache_bytes.
//  - global mode: if the whole split fits in cache_bytes it is read once; otherwise each batch's
//    examples are read by index (nearby indices grouped into a few hyperslab reads).
// Validation: the constructor validates at least this rank's contiguous share of the split (all ranks
// together cover it) and throws Error naming dataset and index; every later read checks what it reads.
// A throwing constructor is a local event: callers agree collectively (e.g. comm.any) before going on.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "hpctrain/data/dataset_schema.hpp"
#include "hpctrain/data/dataset_reader.hpp"
#include "hpctrain/data/sampler.hpp"
#include "hpctrain/loader/batch.hpp"

namespace hpctrain::loader {

struct LoaderOptions {
  std::string split = "train";
  int64_t batch_size = 32;            // per-rank micro-batch, examples
  data::ShuffleMode shuffle = data::ShuffleMode::shard;
  uint64_t seed = 42;
  bool drop_last = false;             // drop each rank's last incomplete batch
  int pad_to_multiple_of = 1;         // text: round the padded length up to a multiple of this
  int64_t pad_token_id = 0;
  int prefetch_batches = 2;           // batches prepared ahead by the background thread; 0: no thread
  // Batches in page-locked memory, so that copies to a CUDA device can be asynchronous (PyTorch DataLoader's
  // pin_memory; Accelerator::prepare_data sets it for a CUDA device). Needs a CUDA LibTorch.
  bool pin_memory = false;
  int64_t cache_bytes = int64_t{512} << 20;  // bytes of examples kept in memory (per rank)
  int rank = 0, world_size = 1;
};

class ShardLoader {
 public:
  ShardLoader(const std::filesystem::path& file, LoaderOptions options);
  ~ShardLoader();  // stops and joins the background thread, even mid-epoch
  ShardLoader(const ShardLoader&) = delete;
  ShardLoader& operator=(const ShardLoader&) = delete;

  [[nodiscard]] int64_t batches_per_epoch() const;   // equal on every rank
  [[nodiscard]] int64_t examples_per_rank() const;   // ceil(N / W), padding included
  [[nodiscard]] int64_t num_examples() const;        // N, examples in the split
  [[nodiscard]] bool streams() const;                // true when examples are read during the epoch
  [[nodiscard]] const LoaderOptions& options() const;
  [[nodiscard]] const data::DatasetReader& reader() const;
  [[nodiscard]] const data::SplitInfo& split_info() const;

  // (Re)starts an epoch at batch `first_batch` (resume: the skipped batches are not read) and the
  // background thread that prepares its batches.
  void start_epoch(int64_t epoch, int64_t first_batch = 0);
  // The next batch of the epoch; nullopt at its end. Rethrows an error of the background thread.
  [[nodiscard]] std::optional<Batch> next();
  // Called by next() with the batches of the epoch handed out so far (first_batch included) after each batch it
  // returns, on the caller's thread: the progress of an evaluation (train::SplitProgress). Empty: none.
  void set_batch_observer(std::function<void(int64_t batches_done)> observer);

 private:
  [[nodiscard]] std::optional<Batch> next_batch();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace hpctrain::loader
