// The state metrics.jsonl reports: the largest optimizer state and model state one rank holds (Note [Optimizer
// state bytes]).
#pragma once

#include <cstdint>

#include "hpctrain/dist/comm.hpp"
#include "hpctrain/optim/optimizer.hpp"

namespace hpctrain::train {

// Note [Optimizer state bytes]: every training line of metrics.jsonl carries `optimizer_state_bytes`, the
// largest over ranks of Optimizer::state_bytes() (each rank's own state tensors; under ZeRO its shard), so
// that one line tells the memory the worst rank needs. It is a max-allreduce of one int64, run by every rank
// on the logged steps only (TrainingLog::logs_step: a pure function of the step, the options and the agreed
// skip, so every rank runs it at the same point). The trainer runs it after the step's comm_bytes were read
// and before the next step's count starts: these 8 bytes per logged step are in no line's comm_bytes, so
// comm_bytes compares between runs (stages, logging intervals) as before.
// `model_state_bytes` rides in the same allreduce (16 bytes then): the largest over ranks of the parameters,
// their gradients between steps and the optimizer state a rank holds (parallel::Strategy::model_state_bytes;
// ZeRO-3 holds shards of all three).
// Collective: every rank of `comm` calls it. Returns bytes.
[[nodiscard]] int64_t largest_optimizer_state_bytes(dist::Comm& comm, const optim::Optimizer& optimizer);
struct LargestStateBytes {
  int64_t optimizer = 0;  // optimizer_state_bytes
  int64_t model = 0;      // model_state_bytes
};
[[nodiscard]] LargestStateBytes largest_state_bytes(dist::Comm& comm, const optim::Optimizer& optimizer,
                                                    int64_t model_state_bytes);

}  // namespace hpctrain::train
