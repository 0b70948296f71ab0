#include "hpctrain/core/log.hpp"

#include <cstdio>
#include <mutex>

namespace hpctrain::log {
namespace {
Context g_context;
std::mutex g_mutex;

std::string prefix(bool force) {
  if (g_context.world_size > 1 && (g_context.all_ranks || force)) return fmt::format("[rank {}] ", g_context.rank);
  return {};
}
bool this_rank_prints() { return g_context.all_ranks || g_context.rank == 0; }
}  // namespace

void set_context(const Context& context) { g_context = context; }
const Context& context() { return g_context; }

void write_info(const std::string& line) {
  if (g_context.quiet || !this_rank_prints()) return;
  std::lock_guard<std::mutex> lock(g_mutex);
  std::fprintf(stdout, "%s%s\n", prefix(false).c_str(), line.c_str());
  std::fflush(stdout);
}

void write_warning(const std::string& line) {
  if (!this_rank_prints()) return;
  std::lock_guard<std::mutex> lock(g_mutex);
  std::fprintf(stderr, "%swarning: %s\n", prefix(false).c_str(), line.c_str());
}

void write_error(const std::string& line) {
  std::lock_guard<std::mutex> lock(g_mutex);
  std::fprintf(stderr, "%serror: %s\n", prefix(true).c_str(), line.c_str());
  std::fflush(stderr);
}

}  // namespace hpctrain::log
