// largest_optimizer_state_bytes (optimizer_state_report.hpp): Note [Optimizer state bytes].
#include "hpctrain/train/optimizer_state_report.hpp"

namespace hpctrain::train {

int64_t largest_optimizer_state_bytes(dist::Comm& comm, const optim::Optimizer& optimizer) {
  return comm.allreduce_value<int64_t>(optimizer.state_bytes(), dist::ReduceOp::max);
}

LargestStateBytes largest_state_bytes(dist::Comm& comm, const optim::Optimizer& optimizer, int64_t model_state_bytes) {
  int64_t values[2] = {optimizer.state_bytes(), model_state_bytes};
  comm.allreduce(values, 2, dist::ReduceOp::max);
  return LargestStateBytes{values[0], values[1]};
}

}  // namespace hpctrain::train
