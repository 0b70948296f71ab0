// The pieces `prep text` and `prep lm` share (prep_common.hpp).
#include "prep_common.hpp"

#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>

#include "hpctrain/core/cpu_info.hpp"
#include "hpctrain/core/error.hpp"
#include "hpctrain/core/log.hpp"
#include "hpctrain/data/byte_source.hpp"
#include "hpctrain/data/text_records.hpp"

namespace hpctrain::prep::detail {

bool is_blank(const std::string& text) {
  return std::all_of(text.begin(), text.end(), [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; });
}

void Temporaries::remove_all() {
  std::error_code ignored;
  for (const auto& path : paths_) std::filesystem::remove(path, ignored);
  paths_.clear();
}

std::filesystem::path temporaries_stem(const std::filesystem::path& output, dist::Comm& comm) {
  int64_t tag = static_cast<int64_t>(::getpid());
  comm.broadcast(&tag, sizeof tag, 0);
  return output.string() + fmt::format(".prep-{}", tag);
}

void remove_own_temporaries(const std::filesystem::path& stem, const std::filesystem::path& output, int rank) {
  const std::string name = stem.filename().string();
  std::vector<std::string> prefixes = {fmt::format("{}.r{}.", name, rank)};
  if (rank == 0) prefixes.push_back(name + ".input-");
  const std::string writers = rank == 0 ? fmt::format("{}.tmp.{}", output.filename().string(), ::getpid()) : "";
  const std::filesystem::path folder = stem.has_parent_path() ? stem.parent_path() : std::filesystem::path(".");
  std::error_code ignored;
  std::vector<std::filesystem::path> doomed;
  for (std::filesystem::directory_iterator it(folder, ignored), end; !ignored && it != end; it.increment(ignored)) {
    const std::string file = it->path().filename().string();
    const bool own = file == writers || std::any_of(prefixes.begin(), prefixes.end(), [&](const std::string& prefix) {
                       return file.rfind(prefix, 0) == 0;
                     });
    if (own) doomed.push_back(it->path());
  }
  for (const auto& path : doomed) std::filesystem::remove(path, ignored);
}

std::filesystem::path decompress_for_ranks(const std::filesystem::path& input, const std::filesystem::path& temporary,
                                           Temporaries& owned, dist::Comm& comm, std::string_view command) {
  if (comm.world_size() == 1) return input;
  int32_t gzip = 0;  // rank 0's answer, broadcast: the ranks must agree whether to read the temporary
  on_every_rank(comm, fmt::format("{}: decompressing '{}'", command, input.string()), [&] {
    if (comm.rank() != 0 || !data::is_gzip_file(input)) return;
    gzip = 1;
    owned.add(temporary);
    data::copy_content(input, temporary);
  });
  comm.broadcast(&gzip, sizeof gzip, 0);
  if (gzip == 0) return input;
  on_every_rank(comm, fmt::format("{}: reading the decompressed '{}'", command, input.string()), [&] {
    HPCTRAIN_CHECK(std::filesystem::is_regular_file(temporary),
                   "'{}' (rank 0 wrote the content of '{}' there) is not visible on this rank: the ranks must share the "
                   "output's folder", temporary.string(), input.string());
  });
  return temporary;
}

int threads_per_rank(int requested, const char* option, dist::Comm& comm) {
  if (requested <= 0) {
    const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    return std::max(1, cores / std::max(1, comm.local_size()));
  }
  const std::string warning = core::thread_oversubscription(option, requested, core::affinity_cpus(), comm.local_size());
  if (!warning.empty()) log::warning("{}", warning);  // rank 0's (Note [Too many threads])
  return requested;
}

void parallel_chunks(std::size_t chunks, int threads, const std::function<void(std::size_t)>& work) {
  std::atomic<std::size_t> next_chunk{0};
  std::exception_ptr error;
  std::mutex error_mutex;
  auto run = [&] {
    try {
      for (std::size_t c; (c = next_chunk.fetch_add(1)) < chunks;) work(c);
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mutex);
      if (!error) error = std::current_exception();
      next_chunk = chunks;
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(run);
  run();
  for (auto& thread : pool) thread.join();
  if (error) std::rethrow_exception(error);
}

void sum_row_counts_over_ranks(int64_t& invalid_utf8, int64_t& truncated, std::map<std::string, int64_t>& skipped,
                               const std::vector<std::string>& reasons, dist::Comm& comm) {
  std::vector<int64_t> values = {invalid_utf8, truncated};
  for (const std::string& reason : reasons) values.push_back(skipped.count(reason) ? skipped.at(reason) : 0);
  comm.allreduce(values.data(), values.size());
  invalid_utf8 = values[0];
  truncated = values[1];
  skipped.clear();
  for (std::size_t i = 0; i < reasons.size(); ++i)
    if (values[2 + i] > 0) skipped[reasons[i]] = values[2 + i];
}

}  // namespace hpctrain::prep::detail
