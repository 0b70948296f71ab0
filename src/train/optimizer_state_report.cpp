// largest_optimizer_state_bytes (optimizer_state_report.hpp): Note [Optimizer state bytes].
#include "hpctrain/train/optimizer_state_report.hpp"

namespace hpctrain::train {

int64_t largest_optimizer_state_bytes(dist::Comm& comm, const optim::Optimizer& optimizer) {
  return comm.allreduce_value<int64_t>(optimizer.state_bytes(), dist::ReduceOp::max);
}

}  // namespace hpctrain::train
