// Rank-aware logging: by default only rank 0 prints; every line carries a rank prefix when all ranks log.
#pragma once

#include <fmt/format.h>

#include <string>

namespace hpctrain::log {

struct Context {
  int rank = 0;
  int world_size = 1;
  bool all_ranks = false;  // --log-all-ranks: every rank prints, lines prefixed "[rank r]"
  bool quiet = false;      // suppress info lines (warnings and errors still print)
};

void set_context(const Context& context);
const Context& context();

void write_info(const std::string& line);
void write_warning(const std::string& line);
// Errors are printed by every rank, always with the rank prefix when world_size > 1.
void write_error(const std::string& line);

template <typename... Args>
void info(fmt::format_string<Args...> format, Args&&... args) {
  write_info(fmt::format(format, std::forward<Args>(args)...));
}
template <typename... Args>
void warning(fmt::format_string<Args...> format, Args&&... args) {
  write_warning(fmt::format(format, std::forward<Args>(args)...));
}
template <typename... Args>
void error(fmt::format_string<Args...> format, Args&&... args) {
  write_error(fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace hpctrain::log
