// Which examples each rank reads, in which order: pure functions of (config, epoch), unit-tested without
// processes. See Note [Sampler partition] and docs/hdf5-format.md ("Sharding, padding and shuffling").
//
// Note [Sampler partition]
// Every rank yields the same number of positions per epoch, per_rank = ceil(N / W), so all ranks run the
// same number of steps. The padded total per_rank * W is filled by wrapping around to the start of the
// (permuted) order, like torch's DistributedSampler; the positions at or past N are flagged is_padding so
// evaluation can drop the duplicates exactly.
//  - shard:  rank r owns padded positions [r * per_rank, (r+1) * per_rank), example = position mod N: one
//            contiguous hyperslab of the file (two when the last shard wraps). The order within the shard is
//            a block shuffle: blocks of block_size positions in a permuted order, each block permuted
//            inside. block_size 0 (or >= per_rank) is one block, i.e. a full permutation of the shard.
//  - global: a permutation of all N seeded by (seed, epoch) only, padded by wrap-around; rank r takes
//            padded positions r, r + W, r + 2W, ... (DistributedSampler). Global batch s, the ranks'
//            batch s together, is padded positions [s * B * W, (s+1) * B * W) of that permutation, whatever W.
//  - none:   the shard partition without shuffling.
// Seeds are derived with core/random.hpp, never std:: distributions, so orders match across compilers.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace hpctrain::data {

enum class ShuffleMode { shard, global, none };

[[nodiscard]] std::string_view to_string(ShuffleMode mode);
// "shard", "global" or "none"; anything else throws Error listing them.
[[nodiscard]] ShuffleMode parse_shuffle_mode(std::string_view text);

struct SamplerConfig {
  int64_t num_examples = 0;   // N, examples in the split
  int rank = 0;
  int world_size = 1;         // W
  int64_t batch_size = 1;     // per-rank micro-batch, examples
  bool drop_last = false;     // drop each rank's last incomplete batch (equal on every rank)
  ShuffleMode shuffle = ShuffleMode::shard;
  uint64_t seed = 0;
  int64_t block_size = 0;     // shard mode: positions per shuffle block; 0 = the whole shard
};

// One position of a rank's epoch.
struct SamplePosition {
  int64_t example = 0;        // index in the split
  bool is_padding = false;    // a wrap-around duplicate of an example another position yields
  int64_t block = 0;          // shard/none: the block of the shard it is read with; global: 0
};

// Throws Error for N <= 0, world_size < 1, rank outside [0, W), batch_size < 1, block_size < 0,
// or drop_last with per_rank < batch_size (an epoch of no batches).
void check_sampler_config(const SamplerConfig& config);

[[nodiscard]] int64_t examples_per_rank(const SamplerConfig& config);  // ceil(N / W)
[[nodiscard]] int64_t batches_per_epoch(const SamplerConfig& config);  // ceil (floor with drop_last) of per_rank / B
// Blocks in this rank's shard (shard/none); 1 in global mode.
[[nodiscard]] int64_t blocks_per_rank(const SamplerConfig& config);
// The sorted, distinct examples of block `block` of this rank's shard (what one block read fetches).
[[nodiscard]] std::vector<int64_t> block_examples(const SamplerConfig& config, int64_t block);

// This rank's examples_per_rank positions for `epoch`, in the order they are yielded.
[[nodiscard]] std::vector<SamplePosition> epoch_order(const SamplerConfig& config, int64_t epoch);
// Positions of batch `batch` (0-based) of an epoch order; resuming at batch k reads from here on.
[[nodiscard]] std::vector<SamplePosition> batch_positions(const std::vector<SamplePosition>& order,
                                                          const SamplerConfig& config, int64_t batch);

// A permutation of [0, n) from SplitMix64 + Fisher–Yates (identical on every platform).
[[nodiscard]] std::vector<int64_t> permutation(int64_t n, uint64_t seed);

}  // namespace hpctrain::data
