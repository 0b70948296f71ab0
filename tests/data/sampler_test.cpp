// The sampler partition (Note [Sampler partition]) as pure functions: every rank simulated in one process.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <map>
#include <set>

#include "hpctrain/core/error.hpp"
#include "hpctrain/data/sampler.hpp"

using namespace hpctrain;
using data::SamplePosition;
using data::SamplerConfig;
using data::ShuffleMode;

namespace {

SamplerConfig config_for(int64_t n, int rank, int world, ShuffleMode mode, int64_t batch = 4, uint64_t seed = 42) {
  SamplerConfig config;
  config.num_examples = n;
  config.rank = rank;
  config.world_size = world;
  config.batch_size = batch;
  config.shuffle = mode;
  config.seed = seed;
  return config;
}

std::vector<int64_t> examples_of(const std::vector<SamplePosition>& positions) {
  std::vector<int64_t> examples;
  for (const auto& position : positions) examples.push_back(position.example);
  return examples;
}

// Every rank's order of one epoch; checks equal lengths and that the non-padding positions cover
// [0, N) exactly once, with exactly per_rank * W - N padding positions.
std::vector<std::vector<SamplePosition>> check_partition(int64_t n, int world, ShuffleMode mode, int64_t block_size,
                                                         int64_t epoch) {
  std::vector<std::vector<SamplePosition>> orders;
  std::map<int64_t, int> seen;
  int64_t padding = 0;
  for (int rank = 0; rank < world; ++rank) {
    SamplerConfig config = config_for(n, rank, world, mode);
    config.block_size = block_size;
    orders.push_back(data::epoch_order(config, epoch));
    BOOST_REQUIRE_EQUAL(static_cast<int64_t>(orders.back().size()), data::examples_per_rank(config));
    for (const auto& position : orders.back()) {
      BOOST_REQUIRE(position.example >= 0 && position.example < n);
      if (position.is_padding) {
        ++padding;
      } else {
        ++seen[position.example];
      }
    }
  }
  BOOST_CHECK_EQUAL(static_cast<int64_t>(seen.size()), n);
  for (const auto& [example, count] : seen) BOOST_CHECK_EQUAL(count, 1);
  BOOST_CHECK_EQUAL(padding, data::examples_per_rank(config_for(n, 0, world, mode)) * world - n);
  return orders;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(sampler)

BOOST_AUTO_TEST_CASE(mode_names) {
  for (auto mode : {ShuffleMode::shard, ShuffleMode::global, ShuffleMode::none}) {
    BOOST_CHECK(data::parse_shuffle_mode(data::to_string(mode)) == mode);
  }
  BOOST_CHECK_THROW((void)data::parse_shuffle_mode("random"), Error);
}

BOOST_AUTO_TEST_CASE(disjoint_complete_equal_counts) {
  for (int64_t n : {1, 2, 3, 7, 10, 16, 17, 100, 1001}) {
    for (int world : {1, 2, 3, 4, 5, 8}) {
      for (auto mode : {ShuffleMode::shard, ShuffleMode::global, ShuffleMode::none}) {
        for (int64_t block_size : {0, 3}) {
          BOOST_TEST_CONTEXT("N=" << n << " W=" << world << " mode=" << data::to_string(mode) << " block=" << block_size) {
            check_partition(n, world, mode, block_size, 3);
            const int64_t batches = data::batches_per_epoch(config_for(n, 0, world, mode));
            for (int rank = 1; rank < world; ++rank) {
              BOOST_CHECK_EQUAL(data::batches_per_epoch(config_for(n, rank, world, mode)), batches);
            }
          }
        }
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(shard_mode_reads_a_contiguous_hyperslab) {
  const int64_t n = 103;
  const int world = 4;  // per_rank 26, padded total 104: rank 3 wraps to example 0
  for (int rank = 0; rank < world; ++rank) {
    auto order = data::epoch_order(config_for(n, rank, world, ShuffleMode::shard), 0);
    std::vector<int64_t> own;
    for (const auto& position : order) {
      if (!position.is_padding) own.push_back(position.example);
    }
    std::sort(own.begin(), own.end());
    const int64_t first = rank * 26, last = std::min<int64_t>(n, first + 26);
    BOOST_REQUIRE_EQUAL(static_cast<int64_t>(own.size()), last - first);
    for (int64_t i = 0; i < last - first; ++i) BOOST_CHECK_EQUAL(own[i], first + i);
    if (rank == 3) {
      const auto padding = std::find_if(order.begin(), order.end(), [](const SamplePosition& p) { return p.is_padding; });
      BOOST_REQUIRE(padding != order.end());
      BOOST_CHECK_EQUAL(padding->example, 0);  // the wrap-around duplicate is the start of the split
    }
  }
  // none: the same shard, in file order.
  const auto plain = examples_of(data::epoch_order(config_for(n, 1, world, ShuffleMode::none), 9));
  for (int64_t i = 0; i < 26; ++i) BOOST_CHECK_EQUAL(plain[i], 26 + i);
}

BOOST_AUTO_TEST_CASE(deterministic_per_seed_and_epoch) {
  for (auto mode : {ShuffleMode::shard, ShuffleMode::global}) {
    const auto config = config_for(1000, 1, 3, mode);
    const auto a = examples_of(data::epoch_order(config, 4));
    BOOST_CHECK(a == examples_of(data::epoch_order(config, 4)));
    BOOST_CHECK(a != examples_of(data::epoch_order(config, 5)));
    BOOST_CHECK(a != examples_of(data::epoch_order(config_for(1000, 1, 3, mode, 4, 43), 4)));
  }
}

BOOST_AUTO_TEST_CASE(golden_orders_match_the_python_reference) {
  // From tests/data/gen_sampler_golden.py (independent implementation of core/random.hpp + global mode).
  BOOST_CHECK(data::permutation(10, 42) == (std::vector<int64_t>{8, 3, 6, 5, 4, 0, 9, 2, 1, 7}));
  const auto order = data::epoch_order(config_for(7, 1, 3, ShuffleMode::global), 5);
  BOOST_REQUIRE_EQUAL(order.size(), 3u);
  BOOST_CHECK(examples_of(order) == (std::vector<int64_t>{3, 5, 6}));
  BOOST_CHECK(!order[0].is_padding && !order[1].is_padding && order[2].is_padding);
}

// Global batch s = the ranks' batch s together. With per-rank batch B * W constant, the same examples
// form each global batch whatever W, except that the last may add flagged wrap-around duplicates.
BOOST_AUTO_TEST_CASE(global_batches_do_not_depend_on_world_size) {
  for (int64_t n : {96, 101}) {
    const int64_t b = 8;
    auto one = config_for(n, 0, 1, ShuffleMode::global, 2 * b);
    const auto one_order = data::epoch_order(one, 2);
    const int64_t steps = data::batches_per_epoch(one);
    std::vector<std::vector<SamplePosition>> two_orders;
    for (int rank = 0; rank < 2; ++rank) two_orders.push_back(data::epoch_order(config_for(n, rank, 2, ShuffleMode::global, b), 2));
    BOOST_CHECK_EQUAL(data::batches_per_epoch(config_for(n, 0, 2, ShuffleMode::global, b)), steps);
    for (int64_t step = 0; step < steps; ++step) {
      std::multiset<int64_t> single, pair;
      for (const auto& p : data::batch_positions(one_order, one, step)) single.insert(p.example);
      for (int rank = 0; rank < 2; ++rank) {
        for (const auto& p : data::batch_positions(two_orders[rank], config_for(n, rank, 2, ShuffleMode::global, b), step)) {
          if (!p.is_padding) pair.insert(p.example);
        }
      }
      BOOST_CHECK_MESSAGE(single == pair, "N=" << n << " step " << step);
    }
  }
}

BOOST_AUTO_TEST_CASE(block_shuffle_reads_each_block_once) {
  auto config = config_for(50, 1, 2, ShuffleMode::shard);
  config.block_size = 7;  // per_rank 25: blocks of 7, 7, 7, 4
  BOOST_CHECK_EQUAL(data::blocks_per_rank(config), 4);
  const auto order = data::epoch_order(config, 1);
  // Blocks appear as contiguous stretches, each exactly its block_examples().
  std::vector<int64_t> visited;
  for (size_t i = 0; i < order.size();) {
    size_t j = i;
    std::vector<int64_t> block;
    while (j < order.size() && order[j].block == order[i].block) block.push_back(order[j++].example);
    std::sort(block.begin(), block.end());
    BOOST_CHECK(block == data::block_examples(config, order[i].block));
    visited.push_back(order[i].block);
    i = j;
  }
  std::sort(visited.begin(), visited.end());
  BOOST_CHECK(visited == (std::vector<int64_t>{0, 1, 2, 3}));
}

BOOST_AUTO_TEST_CASE(resume_is_the_tail_of_the_epoch) {
  const auto config = config_for(37, 0, 2, ShuffleMode::shard, 5);
  const auto order = data::epoch_order(config, 0);
  BOOST_CHECK_EQUAL(data::batches_per_epoch(config), 4);  // 19 per rank: 5, 5, 5, 4
  std::vector<int64_t> tail;
  for (int64_t batch = 2; batch < 4; ++batch) {
    for (const auto& p : data::batch_positions(order, config, batch)) tail.push_back(p.example);
  }
  const std::vector<int64_t> all = examples_of(order);
  BOOST_CHECK(tail == std::vector<int64_t>(all.begin() + 10, all.end()));
  BOOST_CHECK_EQUAL(data::batch_positions(order, config, 3).size(), 4u);
  BOOST_CHECK_THROW((void)data::batch_positions(order, config, 4), Error);
  auto dropped = config;
  dropped.drop_last = true;
  BOOST_CHECK_EQUAL(data::batches_per_epoch(dropped), 3);
}

BOOST_AUTO_TEST_CASE(fewer_examples_than_ranks) {
  const auto orders = check_partition(3, 5, ShuffleMode::shard, 0, 0);
  for (int rank = 0; rank < 5; ++rank) {
    BOOST_REQUIRE_EQUAL(orders[rank].size(), 1u);
    BOOST_CHECK_EQUAL(orders[rank][0].is_padding, rank >= 3);
  }
  check_partition(3, 5, ShuffleMode::global, 0, 0);
  check_partition(1, 8, ShuffleMode::global, 0, 0);
}

BOOST_AUTO_TEST_CASE(bad_configurations_are_clear_errors) {
  auto message = [](const SamplerConfig& config) {
    try {
      data::check_sampler_config(config);
    } catch (const Error& error) {
      return std::string(error.what());
    }
    return std::string();
  };
  BOOST_CHECK(message(config_for(0, 0, 2, ShuffleMode::shard)).find("0 examples") != std::string::npos);
  BOOST_CHECK(message(config_for(10, 2, 2, ShuffleMode::shard)).find("rank 2 of world size 2") != std::string::npos);
  auto dropped = config_for(5, 0, 2, ShuffleMode::shard, 4);
  dropped.drop_last = true;
  BOOST_CHECK(message(dropped).find("no full batch") != std::string::npos);
  BOOST_CHECK_THROW((void)data::epoch_order(config_for(0, 0, 1, ShuffleMode::global), 0), Error);
}

BOOST_AUTO_TEST_SUITE_END()
