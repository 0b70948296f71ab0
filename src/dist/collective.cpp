// agree_on_failure (collective.hpp, Note [Agree on the first failure]).
#include "hpctrain/dist/collective.hpp"

#include "hpctrain/core/error.hpp"

namespace hpctrain::dist {

void agree_on_failure(Comm& comm, const std::string& what, const std::string& local_error, Wait wait) {
  if (wait == Wait::idle) comm.idle_barrier();
  const auto failed = comm.allgather_value<int32_t>(local_error.empty() ? 0 : 1);
  for (int r = 0; r < comm.world_size(); ++r) {
    if (failed[static_cast<std::size_t>(r)] == 0) continue;
    std::string message = local_error;
    comm.broadcast_string(message, r);
    fail("{} failed on rank {}: {}", what, r, message);
  }
}

}  // namespace hpctrain::dist
