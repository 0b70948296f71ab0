// Collective error agreement: run a step on every rank and agree on the first failure.
//
// Note [Agree on the first failure]
// A step that can fail on some ranks only (opening a file, a save on rank 0, building a model) must not
// leave the other ranks waiting in the next collective. run_collectively() catches the step's exception
// on each rank, then every rank takes part in one allgather of failure flags; if any rank failed, the
// lowest failing rank broadcasts its message and every rank throws the same Error ("WHAT failed on
// rank R: MESSAGE"). So the ranks leave the step together, all failed or all succeeded, and main() ends
// the job with the one message. Work that only rank 0 does (saves, reads it broadcasts) uses the same
// helper: the other ranks' work is empty and succeeds.
#pragma once

#include <exception>
#include <string>
#include <utility>

#include "hpctrain/core/memory_info.hpp"
#include "hpctrain/dist/comm.hpp"

namespace hpctrain::dist {

// How a rank that is done waits for the others: busy (MPI's own wait, the lowest latency) or idle
// (Comm::idle_barrier first: for work of seconds that leaves ranks waiting, such as one rank writing).
enum class Wait { busy, idle };

// Collective: `local_error` is empty where this rank succeeded. Returns normally on every rank when all
// succeeded; otherwise throws Error on every rank with the lowest failing rank's message.
void agree_on_failure(Comm& comm, const std::string& what, const std::string& local_error, Wait wait = Wait::busy);

// Collective: runs `work()` on this rank and agrees on the outcome (Note [Agree on the first failure]).
template <typename Work>
void run_collectively(Comm& comm, const std::string& what, Work&& work, Wait wait = Wait::busy) {
  std::string error;
  try {
    std::forward<Work>(work)();
  } catch (const std::exception& e) {
    error = core::is_allocation_failure(e) ? core::describe_allocation_failure(e) : e.what();
    if (error.empty()) error = "unknown error";
  }
  agree_on_failure(comm, what, error, wait);
}

}  // namespace hpctrain::dist
