// The stall inspector's message (stall_report.hpp, Note [Collective timeout]).
#include "stall_report.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>

#include "hpctrain/core/error.hpp"

namespace hpctrain::dist::stall {
namespace {

const CommState* find(const RankState& rank, int64_t comm_id) {
  for (const CommState& comm : rank.comms)
    if (comm.comm_id == comm_id) return &comm;
  return nullptr;
}

std::string ranks_text(const std::vector<int>& ranks) {
  return fmt::format("{} {}", ranks.size() == 1 ? "rank" : "ranks", fmt::join(ranks, ", "));
}

std::string collective_name(Kind kind, int64_t number, int64_t comm_id) {
  std::string name = fmt::format("{} #{}", to_string(kind), number);
  if (comm_id != 0) name += fmt::format(" on duplicate communicator {}", comm_id);
  return name;
}

// Where a rank that has not arrived is: its last completed collective, and what it is in now if anything.
std::string not_arrived_detail(const CommState& state) {
  std::string detail = state.completed == 0 ? "no collective completed yet"
                                            : fmt::format("last completed collective #{}", state.completed);
  if (!state.inside) return fmt::format("{}, {:.0f} s ago", detail, state.seconds);
  return detail + fmt::format("; in {} for {:.0f} s", collective_name(state.kind, state.entered, state.comm_id),
                              state.seconds);
}

// Collectives a rank is in on other communicators (a deadlock across communicators shows up here).
std::string elsewhere(const RankState& rank, int64_t comm_id) {
  std::vector<std::string> parts;
  for (const CommState& comm : rank.comms)
    if (comm.comm_id != comm_id && comm.inside)
      parts.push_back(fmt::format("in {} for {:.0f} s", collective_name(comm.kind, comm.entered, comm.comm_id), comm.seconds));
  return parts.empty() ? "" : fmt::format(" ({})", fmt::join(parts, "; "));
}

}  // namespace

const char* to_string(Kind kind) {
  switch (kind) {
    case Kind::none: return "no collective";
    case Kind::barrier: return "barrier";
    case Kind::allreduce: return "allreduce";
    case Kind::broadcast: return "broadcast";
    case Kind::allgather: return "allgather";
  }
  return "collective";
}

std::vector<int64_t> encode(const std::vector<CommState>& comms) {
  std::vector<int64_t> words;
  for (const CommState& c : comms) {
    words.insert(words.end(), {c.comm_id, c.inside ? 1 : 0, static_cast<int64_t>(c.kind), c.entered, c.completed,
                               static_cast<int64_t>(std::llround(c.seconds * 1000))});
  }
  return words;
}

std::vector<CommState> decode(const std::vector<int64_t>& words) {
  HPCTRAIN_CHECK(words.size() % kWordsPerComm == 0, "stall inspector: a reply of {} words is not {} per communicator",
                 words.size(), kWordsPerComm);
  std::vector<CommState> comms;
  for (std::size_t i = 0; i < words.size(); i += kWordsPerComm) {
    const bool known_kind = words[i + 2] >= 0 && words[i + 2] <= static_cast<int64_t>(Kind::allgather);
    comms.push_back({words[i], words[i + 1] != 0, known_kind ? static_cast<Kind>(words[i + 2]) : Kind::none,
                     words[i + 3], words[i + 4], static_cast<double>(words[i + 5]) / 1000, {}});
  }
  return comms;
}

std::vector<int> waiting_ranks(const CommState& stalled, const std::vector<RankState>& ranks) {
  std::vector<int> waiting;
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    const CommState* state = ranks[r].answered ? find(ranks[r], stalled.comm_id) : nullptr;
    if (state != nullptr && state->inside && state->entered == stalled.entered) waiting.push_back(static_cast<int>(r));
  }
  return waiting;
}

std::string message(const CommState& stalled, double timeout_seconds, const std::vector<RankState>& ranks) {
  std::vector<int> completed;
  std::vector<std::string> silent, missing;
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    const int rank = static_cast<int>(r);
    const CommState* state = ranks[r].answered ? find(ranks[r], stalled.comm_id) : nullptr;
    if (!ranks[r].answered) silent.push_back(ranks[r].host.empty() ? fmt::format("rank {}", rank)
                                                                    : fmt::format("rank {} on {}", rank, ranks[r].host));
    else if (state != nullptr && state->inside && state->entered == stalled.entered) continue;  // waiting
    else if (state != nullptr && state->completed >= stalled.entered) completed.push_back(rank);
    else if (state == nullptr) missing.push_back(fmt::format("rank {} (no such communicator)", rank));
    else missing.push_back(fmt::format("rank {} ({}){}", rank, not_arrived_detail(*state), elsewhere(ranks[r], stalled.comm_id)));
  }
  const std::string what = stalled.label.empty() ? "" : fmt::format(" ({})", stalled.label);
  std::string text = fmt::format("collective timeout: {}{} did not complete within {:g} s; waiting: {}",
                                 collective_name(stalled.kind, stalled.entered, stalled.comm_id), what, timeout_seconds,
                                 ranks_text(waiting_ranks(stalled, ranks)));
  if (!missing.empty()) text += fmt::format("; not arrived: {}", fmt::join(missing, ", "));
  if (!completed.empty()) text += fmt::format("; already past it: {}", ranks_text(completed));
  if (!silent.empty())
    text += fmt::format("; no answer from {} (its process stopped, or its node or the network to it is down?)",
                        fmt::join(silent, ", "));
  return text + "\n  hint: a rank stuck in I/O or running different code; --collective-timeout SECONDS changes the limit "
                "(0: off)";
}

}  // namespace hpctrain::dist::stall
