// `hpctrain train` as a library call: builds the model, prepares it on an Accelerator, runs the
// training loop (accumulation, clipping, AdamW + schedule, evaluation, checkpoints, resume) and writes
// OUTPUT/final/. The loop and its invariants are described in src/train/trainer.cpp.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include "hpctrain/dist/comm.hpp"
#include "hpctrain/train/eval_metrics.hpp"
#include "hpctrain/train/train_options.hpp"

namespace hpctrain::train {

struct TrainResult {
  int64_t global_step = 0;
  int64_t start_step = 0;            // > 0 when resumed
  int64_t samples_seen = 0;          // examples trained on in this process's run (all ranks)
  double seconds = 0;                // wall time of the training loop
  double samples_per_second = 0;     // samples_seen / seconds
  std::optional<EvalMetrics> eval;  // final evaluation, when the file has the eval split
  double majority_baseline = 0;     // what a trivial predictor scores (classification: the most common label)
  std::filesystem::path final_dir;   // OUTPUT/final; empty when stopped early
  // Stopped early (a signal or the time limit, Note [Stop agreement]): why ("SIGTERM on rank 1"), and the
  // checkpoint of the last step, which --resume auto continues. Empty otherwise.
  std::string stopped_by;
  std::filesystem::path checkpoint_dir;
};

// Collective: every rank calls it with the same options. Validates them first (Error before any work),
// logs on rank 0 (log::Context), and throws Error on every rank for errors every rank sees (e.g. a
// non-finite loss); a local error propagates on its rank only (main() ends the job, Note [Errors end the job]).
TrainResult run_training(dist::Comm& comm, const TrainOptions& options);

}  // namespace hpctrain::train
