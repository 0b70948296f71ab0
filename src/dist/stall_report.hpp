// The stall inspector's report (Note [Collective timeout]): what one rank knows about the collectives of
// every rank, and the one message that ends a job whose collective did not complete. Pure (no MPI), so
// src/dist/mpi_comm.cpp gathers the states and tests/dist checks the wording.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace hpctrain::dist::stall {

enum class Kind : int64_t { none = 0, barrier, allreduce, broadcast, allgather };
[[nodiscard]] const char* to_string(Kind kind);

// One communicator as seen by one rank. Communicators are numbered in creation order (the world is 0,
// each duplicate the next number), which is the same on every rank because creation is collective.
struct CommState {
  int64_t comm_id = 0;
  bool inside = false;    // in a collective right now
  Kind kind = Kind::none;  // the collective entered last
  int64_t entered = 0;    // its number on this communicator (1 = the first)
  int64_t completed = 0;  // number of the last collective that returned
  double seconds = 0;     // since `entered` (inside) or since `completed` returned (not inside)
  std::string label;      // what the communicator does (Comm::set_label); this rank's own only, never sent
};

struct RankState {
  bool answered = false;  // false: the rank's watchdog did not reply in time
  std::vector<CommState> comms;
  std::string host;  // its node (MPI_Get_processor_name), named for a rank that does not answer; may be empty
};

// Six int64 per communicator (id, inside, kind, entered, completed, milliseconds), for the watchdogs' point-to-point replies.
inline constexpr std::size_t kWordsPerComm = 6;
[[nodiscard]] std::vector<int64_t> encode(const std::vector<CommState>& comms);
[[nodiscard]] std::vector<CommState> decode(const std::vector<int64_t>& words);

// `stalled`: this rank's collective that exceeded `timeout_seconds`; `ranks[r]`: rank r's state.
// Example: "collective timeout: allreduce #57 did not complete within 300 s; waiting: ranks 0, 2; not
// arrived: rank 1 (last completed collective #56, 301 s ago)"; a rank whose node or link is down: "...
// waiting: rank 0; no answer from rank 1 on node-b (its process stopped, or its node or the network to it is
// down?)".
[[nodiscard]] std::string message(const CommState& stalled, double timeout_seconds, const std::vector<RankState>& ranks);

// Ranks waiting in the same collective as `stalled` (inside, same communicator and number).
[[nodiscard]] std::vector<int> waiting_ranks(const CommState& stalled, const std::vector<RankState>& ranks);

}  // namespace hpctrain::dist::stall
