// Private: the pieces that `prep text` and `prep lm` share at corpus scale (Note [Prep at corpus scale] in
// text_prep.cpp): collective phases, the temporaries next to the output and the threads per rank.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hpctrain/dist/collective.hpp"
#include "hpctrain/dist/comm.hpp"

namespace hpctrain::prep::detail {

// run_collectively with several ranks; alone, the error passes unchanged (the messages users know). A rank
// done early waits idle: the phases take seconds, and rank 0 writes alone on the node's cores.
template <typename Work>
void on_every_rank(dist::Comm& comm, const std::string& what, Work&& work) {
  if (comm.world_size() == 1) return work();
  dist::run_collectively(comm, what, std::forward<Work>(work), dist::Wait::idle);
}

// Files removed when it goes out of scope (or by remove_all): decompressed inputs, token streams.
class Temporaries {
 public:
  Temporaries() = default;
  Temporaries(const Temporaries&) = delete;
  Temporaries& operator=(const Temporaries&) = delete;
  ~Temporaries() { remove_all(); }
  void add(std::filesystem::path path) { paths_.push_back(std::move(path)); }
  void remove_all();

 private:
  std::vector<std::filesystem::path> paths_;
};

// The stem of a prep's temporaries, "OUTPUT.prep-TAG" with TAG rank 0's process id (the same on every rank).
[[nodiscard]] std::filesystem::path temporaries_stem(const std::filesystem::path& output, dist::Comm& comm);

// This rank's files among a prep's temporaries (stem: temporaries_stem): its own ("STEM.rRANK.*": bucket files,
// token streams), and on rank 0 the decompressed inputs ("STEM.input-*") and the dataset writer's temporary
// output ("OUTPUT.tmp.PID", data::DatasetWriter). For dist::AbortCleanup (Note [Cleanup before an abort]).
void remove_own_temporaries(const std::filesystem::path& stem, const std::filesystem::path& output, int rank);

// Note [Splitting a gzip input] (text_prep.cpp): with several ranks, rank 0 writes a gzip input's content to
// `temporary` (owned by `owned`) and every rank reads that instead. Returns the file to read: `input` itself
// when it is plain or the job has one rank. `command` ("prep text") starts the phases' names. Collective.
[[nodiscard]] std::filesystem::path decompress_for_ranks(const std::filesystem::path& input,
                                                         const std::filesystem::path& temporary, Temporaries& owned,
                                                         dist::Comm& comm, std::string_view command);

// A text of only spaces, tabs and line breaks (an empty document or field).
[[nodiscard]] bool is_blank(const std::string& text);

// Worker threads per rank: `requested`, or with 0 the node's hardware threads / the ranks on the node (a
// warning when `requested` oversubscribes the CPUs this process may use; `option` names it).
[[nodiscard]] int threads_per_rank(int requested, const char* option, dist::Comm& comm);

// Runs work(chunk) for every chunk in [0, chunks) on `threads` threads, this one among them; once all have
// stopped, rethrows the first exception (the others stop taking chunks after it).
void parallel_chunks(std::size_t chunks, int threads, const std::function<void(std::size_t)>& work);

// What --memory-mb allows a prep run: a block of raw rows or documents per read, the bucket files' write
// buffers and one bucket of examples held by rank 0 (each prep's plan_budget sizes them).
struct Budget {
  std::size_t block_bytes = 0;
  std::size_t buffer_bytes = 0;
  int64_t rows_per_bucket = 0;
};

// Sums over the ranks (collective: all take part) the counters each rank has for its own rows: rows whose
// invalid UTF-8 was replaced, truncated examples and, for each of `reasons`, the rows skipped (an entry of
// `skipped` is kept only when its sum is > 0).
void sum_row_counts_over_ranks(int64_t& invalid_utf8, int64_t& truncated, std::map<std::string, int64_t>& skipped,
                               const std::vector<std::string>& reasons, dist::Comm& comm);

}  // namespace hpctrain::prep::detail
