// mpirun -np 2: largest_optimizer_state_bytes (Note [Optimizer state bytes]) is the max over ranks of each
// rank's own Optimizer::state_bytes(). The ranks hold optimizers of different sizes (as ZeRO shards may):
// rank r has an AdamW over 100 (r + 1) fp32 elements, 800 (r + 1) bytes of state; every rank gets the largest.
#include <ATen/ATen.h>

#include <cstdio>
#include <exception>

#include "hpctrain/core/error.hpp"
#include "hpctrain/dist/comm.hpp"
#include "hpctrain/optim/adamw.hpp"
#include "hpctrain/train/optimizer_state_report.hpp"

using namespace hpctrain;

namespace {

int run(dist::Comm& comm) {
  const int64_t elements = 100 * (comm.rank() + 1);
  const optim::NamedParameters named = {{"w", at::zeros({elements / 4, 4}).requires_grad_()}};
  const optim::AdamW adamw(named, {}, optim::AdamWOptions{});
  const int64_t own = adamw.state_bytes();
  HPCTRAIN_CHECK(own == 8 * elements, "rank {}: AdamW holds {} bytes of state for {} fp32 elements, expected {}",
                 comm.rank(), own, elements, 8 * elements);
  const int64_t largest = train::largest_optimizer_state_bytes(comm, adamw);
  const int64_t expected = 8 * 100 * comm.world_size();  // the last rank's
  HPCTRAIN_CHECK(largest == expected, "rank {}: largest_optimizer_state_bytes = {}, expected {} (own {})",
                 comm.rank(), largest, expected, own);
  if (comm.is_main_process())
    std::printf("optimizer_state_bytes: own %lld, largest over %d ranks %lld\n", static_cast<long long>(own),
                comm.world_size(), static_cast<long long>(largest));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  dist::MpiRuntime runtime(&argc, &argv);
  try {
    return run(runtime.world());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "[rank %d] FAILED: %s\n", runtime.world().rank(), e.what());
    runtime.world().abort(1);
  }
}
