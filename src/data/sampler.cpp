#include "hpctrain/data/sampler.hpp"

#include <algorithm>
#include <numeric>

#include "hpctrain/core/error.hpp"
#include "hpctrain/core/random.hpp"

namespace hpctrain::data {
namespace {

// Purposes mixed into derived seeds, so the streams of one (seed, epoch) never coincide.
constexpr uint64_t kGlobalStream = 0x676c6f62616cull;  // "global"
constexpr uint64_t kBlockOrderStream = 1;
constexpr uint64_t kWithinBlockStream = 2;

int64_t effective_block_size(const SamplerConfig& config) {
  const int64_t per_rank = examples_per_rank(config);
  if (config.shuffle == ShuffleMode::global || config.block_size == 0) return per_rank;
  return std::min(config.block_size, per_rank);
}

std::vector<int64_t> identity(int64_t n) {
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  return order;
}

std::vector<SamplePosition> shard_order(const SamplerConfig& config, int64_t epoch) {
  const int64_t per_rank = examples_per_rank(config), block_size = effective_block_size(config);
  const int64_t num_blocks = blocks_per_rank(config);
  const bool shuffled = config.shuffle == ShuffleMode::shard;
  const uint64_t rank_seed = derive_seed(config.seed, static_cast<uint64_t>(epoch), static_cast<uint64_t>(config.rank));
  const std::vector<int64_t> blocks =
      shuffled ? permutation(num_blocks, derive_seed(rank_seed, kBlockOrderStream)) : identity(num_blocks);
  std::vector<SamplePosition> order;
  order.reserve(static_cast<size_t>(per_rank));
  for (int64_t block : blocks) {
    const int64_t first = block * block_size, count = std::min(per_rank, first + block_size) - first;
    const std::vector<int64_t> within =
        shuffled ? permutation(count, derive_seed(rank_seed, kWithinBlockStream, static_cast<uint64_t>(block)))
                 : identity(count);
    for (int64_t q : within) {
      const int64_t padded = config.rank * per_rank + first + q;
      order.push_back({padded % config.num_examples, padded >= config.num_examples, block});
    }
  }
  return order;
}

std::vector<SamplePosition> global_order(const SamplerConfig& config, int64_t epoch) {
  // Seeded by (seed, epoch) only: the permutation, and so every global batch, is the same for any W.
  const std::vector<int64_t> shuffled =
      permutation(config.num_examples, derive_seed(config.seed, static_cast<uint64_t>(epoch), kGlobalStream));
  const int64_t per_rank = examples_per_rank(config);
  std::vector<SamplePosition> order;
  order.reserve(static_cast<size_t>(per_rank));
  for (int64_t k = 0; k < per_rank; ++k) {
    const int64_t padded = config.rank + k * config.world_size;
    order.push_back({shuffled[static_cast<size_t>(padded % config.num_examples)], padded >= config.num_examples, 0});
  }
  return order;
}

}  // namespace

std::string_view to_string(ShuffleMode mode) {
  switch (mode) {
    case ShuffleMode::shard: return "shard";
    case ShuffleMode::global: return "global";
    case ShuffleMode::none: return "none";
  }
  return "?";
}

ShuffleMode parse_shuffle_mode(std::string_view text) {
  for (ShuffleMode mode : {ShuffleMode::shard, ShuffleMode::global, ShuffleMode::none}) {
    if (text == to_string(mode)) return mode;
  }
  fail("unknown shuffle mode '{}': expected shard, global or none", text);
}

void check_sampler_config(const SamplerConfig& config) {
  HPCTRAIN_CHECK(config.num_examples > 0, "sampler: the split has {} examples; expected at least one", config.num_examples);
  HPCTRAIN_CHECK(config.world_size >= 1 && config.rank >= 0 && config.rank < config.world_size,
                 "sampler: rank {} of world size {}: expected 0 <= rank < world_size", config.rank, config.world_size);
  HPCTRAIN_CHECK(config.batch_size >= 1, "sampler: batch size {}: expected >= 1", config.batch_size);
  HPCTRAIN_CHECK(config.block_size >= 0, "sampler: block size {}: expected >= 0", config.block_size);
  HPCTRAIN_CHECK(!config.drop_last || examples_per_rank(config) >= config.batch_size,
                 "sampler: {} examples per rank ({} examples over {} ranks) make no full batch of {} with drop_last; "
                 "lower the batch size or turn drop_last off",
                 examples_per_rank(config), config.num_examples, config.world_size, config.batch_size);
}

int64_t examples_per_rank(const SamplerConfig& config) {
  return (config.num_examples + config.world_size - 1) / config.world_size;
}

int64_t batches_per_epoch(const SamplerConfig& config) {
  const int64_t per_rank = examples_per_rank(config);
  return config.drop_last ? per_rank / config.batch_size : (per_rank + config.batch_size - 1) / config.batch_size;
}

int64_t blocks_per_rank(const SamplerConfig& config) {
  const int64_t block_size = effective_block_size(config);
  return (examples_per_rank(config) + block_size - 1) / block_size;
}

std::vector<int64_t> block_examples(const SamplerConfig& config, int64_t block) {
  check_sampler_config(config);
  HPCTRAIN_CHECK(config.shuffle != ShuffleMode::global, "sampler: global mode has no shard blocks");
  HPCTRAIN_CHECK(block >= 0 && block < blocks_per_rank(config), "sampler: block {} outside [0, {})", block,
                 blocks_per_rank(config));
  const int64_t per_rank = examples_per_rank(config), block_size = effective_block_size(config);
  const int64_t first = config.rank * per_rank + block * block_size;
  const int64_t last = config.rank * per_rank + std::min(per_rank, (block + 1) * block_size);
  std::vector<int64_t> examples;
  for (int64_t padded = first; padded < last; ++padded) examples.push_back(padded % config.num_examples);
  std::sort(examples.begin(), examples.end());
  examples.erase(std::unique(examples.begin(), examples.end()), examples.end());
  return examples;
}

std::vector<SamplePosition> epoch_order(const SamplerConfig& config, int64_t epoch) {
  check_sampler_config(config);
  HPCTRAIN_CHECK(epoch >= 0, "sampler: epoch {}: expected >= 0", epoch);
  return config.shuffle == ShuffleMode::global ? global_order(config, epoch) : shard_order(config, epoch);
}

std::vector<SamplePosition> batch_positions(const std::vector<SamplePosition>& order, const SamplerConfig& config,
                                            int64_t batch) {
  HPCTRAIN_CHECK(batch >= 0 && batch < batches_per_epoch(config), "sampler: batch {} outside [0, {}) of the epoch",
                 batch, batches_per_epoch(config));
  const auto first = static_cast<size_t>(batch * config.batch_size);
  const size_t last = std::min(order.size(), first + static_cast<size_t>(config.batch_size));
  return {order.begin() + static_cast<std::ptrdiff_t>(first), order.begin() + static_cast<std::ptrdiff_t>(last)};
}

std::vector<int64_t> permutation(int64_t n, uint64_t seed) {
  std::vector<int64_t> order = identity(n);
  shuffle(order, seed);
  return order;
}

}  // namespace hpctrain::data
