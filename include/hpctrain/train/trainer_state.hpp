// The trainer's resumable state (trainer_state.json, Hugging Face Trainer's keys plus an "hpctrain" object)
// and plan_start(), the pure function that decides where a resumed run continues in the data.
//
// Note [Resume position]
// The data position is (epoch, samples_in_epoch): how many positions of the epoch's order all ranks
// together have consumed, padding included. Row j of micro-batch m on rank r has the position key
// (m * B + j) * W + r. In --shuffle global mode that is its position in the epoch's permutation
// (data/sampler.hpp: rank r takes positions r, r+W, ...), independent of W, B and accumulation, so a
// run resumed on any number of ranks starts at micro-batch floor(samples_in_epoch / (B * W)) and skips
// the rows whose key is below samples_in_epoch: no example is skipped or seen twice within the epoch.
// In shard/none mode the key means the same only for the same W (every rank consumed
// samples_in_epoch / W of its own shard), so a different W mid-epoch is refused.
// The epoch's order is a function of (seed, epoch) only; the checkpoint's seed always wins on resume.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "hpctrain/data/sampler.hpp"
#include "hpctrain/train/schedule.hpp"

namespace hpctrain::train {

// How the run reads data: what a position in the data means depends on these.
struct RunGeometry {
  int world_size = 1;
  int64_t per_rank_batch = 1;    // examples per rank per micro-batch
  int64_t accumulation = 1;      // micro-batches per optimizer step
  data::ShuffleMode shuffle = data::ShuffleMode::shard;
  uint64_t seed = 42;
  int64_t train_examples = 0;    // N of the train split
  bool drop_last = false;

  [[nodiscard]] int64_t global_batch() const { return per_rank_batch * world_size * accumulation; }
  [[nodiscard]] int64_t micro_batches_per_epoch() const;  // per rank (equal on every rank)
  [[nodiscard]] int64_t steps_per_epoch() const;          // ceil(micro_batches_per_epoch / accumulation)
  [[nodiscard]] int64_t padded_epoch_size() const;        // positions per epoch: ceil(N / W) * W
};

struct DataPosition {
  int64_t epoch = 0;             // 0-based
  int64_t samples_in_epoch = 0;  // positions consumed by all ranks together (Note [Resume position])
};

struct TrainerState {
  int64_t global_step = 0;       // steps taken (skipped non-finite steps included)
  DataPosition position;
  int64_t samples_seen = 0;      // examples trained on in all epochs, padding duplicates excluded
  int64_t skipped_steps = 0;     // --skip-nonfinite
  RunGeometry geometry;          // at save time
  LrSchedule schedule;           // at save time (recomputed on resume from the current options)
  int64_t max_steps = 0, num_train_epochs = 0, logging_steps = 0, eval_steps = 0, save_steps = 0;
  std::optional<double> best_metric;   // highest eval_accuracy so far
  std::string best_model_checkpoint;   // checkpoint saved at that evaluation's step, if any
  nlohmann::json log_history = nlohmann::json::array();  // HF entries: {"step","epoch","loss",...}
  std::string run_id;                  // the run that wrote it (run_folder.hpp, Note [One run per folder])

  // Hugging Face's fractional epoch: epoch + samples_in_epoch / padded_epoch_size.
  [[nodiscard]] double epoch_float() const;
};

[[nodiscard]] nlohmann::json to_json(const TrainerState& state);
// Every field validated (type and range: a step within max_steps, an epoch index within the steps taken, a
// position within the epoch, `epoch` equal to the exact position); Error naming `source` (the file), the
// field, the expected and the actual value.
[[nodiscard]] TrainerState trainer_state_from_json(const nlohmann::json& json, const std::string& source);

// Where and how a run starts.
struct StartPlan {
  RunGeometry geometry;          // the requested one, with per_rank_batch/seed adjusted on resume
  DataPosition position;
  int64_t first_batch = 0;       // micro-batch of position.epoch the loader starts at
  int64_t global_step = 0;
  std::vector<std::string> notes;  // what changed relative to the checkpoint, for the log
};

// saved: the checkpoint's state, or nullptr for a fresh run. Rules (Note [Resume position]): the
// checkpoint's seed is kept; with another W or accumulation the per-rank batch becomes
// G / (W * accumulation) when that divides G, the checkpoint's global batch, else the requested batch
// is kept and the global batch changes (noted). Error (with a hint) for a different train split size,
// or a mid-epoch resume that changes the shuffle mode, or W in shard/none mode.
[[nodiscard]] StartPlan plan_start(const TrainerState* saved, RunGeometry requested);

// Optimizer steps of the whole run when it starts at `plan`: max_steps when > 0, else the steps left
// in the current epoch plus full epochs up to `epochs`, counted from plan.global_step.
[[nodiscard]] int64_t total_steps(const StartPlan& plan, int64_t epochs, int64_t max_steps);

// Whether row `row` of micro-batch `batch` on `rank` lies before the resume position (skip it).
[[nodiscard]] bool before_position(const RunGeometry& geometry, int rank, int64_t batch, int64_t row,
                                   int64_t samples_in_epoch);

}  // namespace hpctrain::train
