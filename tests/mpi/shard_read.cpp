// mpirun -np W mpi_shard_read [num_examples] [batch_size]
// Each rank reads its share of a split through ShardLoader; the ranks allgather what they yielded
// (example index, padding flag, checksum of the tokens) and rank 0 checks, for every shuffle mode and
// both the resident and the streamed read path, that together they yield the split exactly:
// every example once outside padding, per_rank * W - N padding positions, equal batch counts, tokens as
// written, and in shard/none mode each rank's examples are its contiguous hyperslab (Note [Sampler
// partition]). Rank 0 writes the file into a temporary directory first. Exits non-zero on failure.
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "../data/dataset_fixtures.hpp"
#include "hpctrain/core/log.hpp"
#include "hpctrain/dist/comm.hpp"
#include "hpctrain/loader/shard_loader.hpp"

using namespace hpctrain;

namespace {

constexpr uint64_t kTextSeed = 2024;

struct Record {  // one yielded example, as allgathered (plain bytes)
  int64_t example = 0;
  int64_t is_padding = 0;
  uint64_t checksum = 0;
};

struct Case {
  data::ShuffleMode mode;
  int64_t cache_bytes;
  [[nodiscard]] std::string name() const {
    return fmt::format("{} {}", data::to_string(mode), cache_bytes > (1 << 20) ? "resident" : "streamed");
  }
};

std::vector<Record> read_epoch(const std::filesystem::path& path, const loader::LoaderOptions& options, int64_t epoch,
                               int64_t& batches) {
  loader::ShardLoader loader(path, options);
  loader.start_epoch(epoch);
  std::vector<Record> records;
  batches = 0;
  while (auto batch = loader.next()) {
    ++batches;
    for (int64_t i = 0; i < batch->size(); ++i) {
      const int64_t length = batch->attention_mask[i].sum().item<int64_t>();
      std::vector<int32_t> ids(static_cast<size_t>(length));
      for (int64_t t = 0; t < length; ++t) ids[t] = static_cast<int32_t>(batch->input_ids[i][t].item<int64_t>());
      records.push_back({batch->example_index[i].item<int64_t>(), batch->is_padding[i].item<bool>() ? 1 : 0,
                         testing::token_checksum(ids.data(), length)});
    }
  }
  HPCTRAIN_CHECK(batches == loader.batches_per_epoch(), "rank yielded {} batches, expected {}", batches,
                 loader.batches_per_epoch());
  return records;
}

// Rank 0's checks of everything every rank yielded; returns the failures.
std::vector<std::string> check_union(const Case& c, const std::vector<std::vector<Record>>& per_rank,
                                     const data::TextExamples& text) {
  std::vector<std::string> failures;
  const int64_t n = text.size(), world = static_cast<int64_t>(per_rank.size());
  const int64_t per_rank_count = (n + world - 1) / world;
  std::map<int64_t, int> seen;
  int64_t padding = 0;
  for (int64_t rank = 0; rank < world; ++rank) {
    for (const Record& record : per_rank[rank]) {
      if (record.example < 0 || record.example >= n) {
        failures.push_back(fmt::format("rank {} yielded example {} outside [0, {})", rank, record.example, n));
        continue;
      }
      const auto expected = testing::token_checksum(text.input_ids.data() + text.offsets[record.example],
                                                    text.length(record.example));
      if (record.checksum != expected) failures.push_back(fmt::format("rank {}: example {} tokens differ", rank, record.example));
      if (record.is_padding) {
        ++padding;
        continue;
      }
      ++seen[record.example];
      const bool contiguous = c.mode == data::ShuffleMode::global ||
                              (record.example >= rank * per_rank_count && record.example < (rank + 1) * per_rank_count);
      if (!contiguous) failures.push_back(fmt::format("rank {}: example {} outside its shard", rank, record.example));
    }
  }
  for (const auto& [example, count] : seen) {
    if (count != 1) failures.push_back(fmt::format("example {} yielded {} times outside padding", example, count));
  }
  if (static_cast<int64_t>(seen.size()) != n) failures.push_back(fmt::format("{} of {} examples yielded", seen.size(), n));
  if (padding != per_rank_count * world - n) {
    failures.push_back(fmt::format("{} padding positions, expected {}", padding, per_rank_count * world - n));
  }
  return failures;
}

// Runs one case on every rank; true on rank 0 when it passed (other ranks return true).
bool run_case(dist::Comm& comm, const std::filesystem::path& path, const Case& c, int64_t batch_size,
              const data::TextExamples& text) {
  loader::LoaderOptions options;
  options.batch_size = batch_size;
  options.shuffle = c.mode;
  options.cache_bytes = c.cache_bytes;
  options.rank = comm.rank();
  options.world_size = comm.world_size();
  int64_t batches = 0;
  const std::vector<Record> records = read_epoch(path, options, 1, batches);

  const auto counts = comm.allgather_value<int64_t>(static_cast<int64_t>(records.size()));
  const auto batch_counts = comm.allgather_value<int64_t>(batches);
  std::vector<std::string> failures;
  for (int r = 0; r < comm.world_size(); ++r) {
    if (counts[r] != counts[0] || batch_counts[r] != batch_counts[0]) {
      failures.push_back(fmt::format("rank {}: {} examples in {} batches, rank 0: {} in {}", r, counts[r],
                                     batch_counts[r], counts[0], batch_counts[0]));
    }
  }
  if (failures.empty()) {  // equal sizes: the allgather is well-formed
    std::vector<Record> gathered(records.size() * static_cast<size_t>(comm.world_size()));
    comm.allgather(records.data(), records.size() * sizeof(Record), gathered.data());
    std::vector<std::vector<Record>> per_rank;
    for (int r = 0; r < comm.world_size(); ++r) {
      per_rank.emplace_back(gathered.begin() + static_cast<std::ptrdiff_t>(r * records.size()),
                            gathered.begin() + static_cast<std::ptrdiff_t>((r + 1) * records.size()));
    }
    failures = check_union(c, per_rank, text);
  }
  if (comm.rank() != 0) return true;
  for (const auto& failure : failures) log::error("{}: {}", c.name(), failure);
  log::info("{}: {} ranks x {} examples in {} batches: {}", c.name(), comm.world_size(), counts[0], batch_counts[0],
            failures.empty() ? "ok" : "FAILED");
  return failures.empty();
}

int run(dist::Comm& comm, int argc, char** argv) {
  const int64_t num_examples = argc > 1 ? std::atoll(argv[1]) : 1001;
  const int64_t batch_size = argc > 2 ? std::atoll(argv[2]) : 16;
  const data::TextExamples text = testing::make_text(num_examples, kTextSeed, /*pairs=*/false);

  // Rank 0 writes the file; the others learn its path and wait for it.
  std::unique_ptr<testing::TempDir> dir;
  std::string path;
  if (comm.rank() == 0) {
    dir = std::make_unique<testing::TempDir>();
    path = testing::write_text_file(dir->file("shard_read.h5"), text, false).string();
  }
  comm.broadcast_string(path, 0);
  comm.barrier();

  const std::vector<Case> cases = {{data::ShuffleMode::shard, int64_t{512} << 20}, {data::ShuffleMode::shard, 4096},
                                   {data::ShuffleMode::global, int64_t{512} << 20}, {data::ShuffleMode::global, 4096},
                                   {data::ShuffleMode::none, int64_t{512} << 20}, {data::ShuffleMode::none, 4096}};
  int32_t passed = 1;
  for (const Case& c : cases) passed &= run_case(comm, path, c, batch_size, text) ? 1 : 0;
  comm.broadcast(&passed, sizeof(passed), 0);
  comm.barrier();  // every rank is done with the file before rank 0 removes it
  return passed ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  dist::MpiRuntime runtime(&argc, &argv);
  dist::Comm& comm = runtime.world();
  log::set_context({comm.rank(), comm.world_size()});
  try {
    return run(comm, argc, argv);
  } catch (const std::exception& error) {
    log::error("{}", error.what());
    comm.abort(1);  // one failing rank must not leave the others waiting in a collective
  }
}
