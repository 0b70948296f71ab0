// Where a run resumes: --resume DIR or --resume auto chosen, verified and read in one place, beside the
// checkpoint folder protocol (checkpoint.hpp). The one entry point for `hpctrain train`; custom loops
// resume with Accelerator::load_state; both verify and read through read_verified_trainer_state().
//
// Note [Never start over silently]
// `--resume auto` continues the newest checkpoint of this run that verifies; each checkpoint it passes
// over is named with its reason (a warning). It starts from step 0 only when the folder holds no
// checkpoint of this run at all. A checkpoint-STEP folder whose trainer_state.json is missing or
// unreadable records no run id: it is this run's (damaged) unless the folder shows that another run used it
// (an old run's files moved aside by --overwrite-output-dir, Note [One run per folder]). When this run has
// checkpoints and none is intact, the run stops with an error listing each one and why it was rejected,
// before metrics.jsonl or the TensorBoard events are opened: nothing of the run is rewritten. A damaged
// checkpoint of this run that a later save would replace is moved aside as damaged, never removed.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "hpctrain/dist/comm.hpp"
#include "hpctrain/train/checkpoint.hpp"
#include "hpctrain/train/run_folder.hpp"
#include "hpctrain/train/trainer_state.hpp"

namespace hpctrain::train {

// Whose a checkpoint folder is (Note [Never start over silently]).
enum class CheckpointOwner {
  this_run,          // its trainer_state.json records this run's id (or an adopted folder's unmarked one)
  this_run_damaged,  // no readable run id, and no sign of another run in the folder
  other_run,         // another run's id, or no readable id in a folder another run used
};
[[nodiscard]] CheckpointOwner checkpoint_owner(const std::filesystem::path& dir, const RunIdentity& run);

// read_verified_trainer_state(dir) (checkpoint.hpp), validated as a TrainerState; Error naming the file
// otherwise, a missing trainer_state.json included.
[[nodiscard]] std::string read_verified_state(const std::filesystem::path& dir);

struct ResumePoint {
  std::filesystem::path dir;         // empty: start fresh
  std::optional<TrainerState> state;  // read from dir/trainer_state.json
};

// Collective. Rank 0 chooses the checkpoint `resume` names ("" fresh, "auto", or a folder) in `output`,
// verifies and reads it; every rank receives the folder and the state. Error on every rank when --resume
// DIR fails to verify, or when --resume auto finds this run's checkpoints but none intact (the message
// lists each with its reason).
[[nodiscard]] ResumePoint find_resume_point(dist::Comm& comm, const std::string& resume,
                                            const std::filesystem::path& output, const RunIdentity& run);

}  // namespace hpctrain::train
