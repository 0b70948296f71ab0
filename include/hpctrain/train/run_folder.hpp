// A run folder belongs to one run (issue 12): its identity (run.json), a lock held for the run's lifetime,
// and the rule for reusing a folder that holds another run's files.
//
// Note [One run per folder]
// Rank 0 claims --output before anything else is read or written there (trainer.cpp: set_up): it takes
// an exclusive flock(2) on OUTPUT/run.lock, held until the run ends, so a second live run on the folder
// fails at once naming the holder (host, pid, run id, written into the lock file). Then it reads
// OUTPUT/run.json. A folder holding another run's files (run.json, trainer_state.json, metrics.jsonl,
// final/, checkpoint-*) is refused unless:
//   --resume        continues that run: its run id is kept (a folder without run.json, from before run ids,
//                   is adopted, and its checkpoints without a run id count as this run's);
//   --overwrite-output-dir  starts a new run there, deleting nothing of the old one: everything of
//                   kRunOutputs it left (Note [Run outputs]) is renamed NAME.run-OLDID at the start;
//                   its checkpoints stay, are never rotated nor resumed, and one whose step the new run
//                   saves is renamed checkpoint-STEP.run-OLDID first.
// Every checkpoint records the run id (trainer_state.json "hpctrain.run_id"): rotation (--save-total-limit)
// and --resume auto only consider the run's own checkpoints. The decision is rank 0's, agreed through
// dist::run_collectively, and the run id reaches every rank.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "hpctrain/dist/comm.hpp"
#include "hpctrain/train/checkpoint.hpp"

namespace hpctrain::train {

inline constexpr const char* kRunIdentityName = "run.json";
inline constexpr const char* kRunLockName = "run.lock";

// Note [Run outputs]
// Everything a run writes at the top of OUTPUT is named here, once, and every writer takes its name from here:
// kRunOutputs below, the checkpoints (checkpoint-STEP/, checkpoint.hpp) and the lock. previous_run_files and
// --overwrite-output-dir's move aside go through kRunOutputs (so final-merged/ is kept as final/ is), and
// check_run_inputs refuses an input (--model, --tokenizer, --data, --model-config, --resume) that lies inside
// one of them, where the run would replace or move what it reads (`--model X/final-merged --output X`).
// A new output gets its name here and a place in kRunOutputs; tests/train/run_folder_test.cpp checks that a
// finished run's folder holds nothing else.
inline constexpr const char* kFinalName = "final";               // the final model (or LoRA adapter)
inline constexpr const char* kFinalMergedName = "final-merged";  // --merge-lora: the base with the adapter merged
inline constexpr const char* kMetricsName = "metrics.jsonl";
inline constexpr const char* kTensorBoardName = "runs";          // --report-to tensorboard
inline constexpr const char* kRunOutputs[] = {kRunIdentityName, kTrainerStateName, kMetricsName, kTensorBoardName,
                                              kFinalName, kFinalMergedName};
// Whether `name` (a top-level entry of OUTPUT) is something a run writes: one of kRunOutputs, a checkpoint
// folder, the lock, or one of `extra` (outputs the user named inside OUTPUT, such as a --timeline file).
[[nodiscard]] bool is_run_output(const std::string& name, const std::vector<std::string>& extra = {});

struct RunIdentity {
  std::string run_id;   // 32 random hex digits
  std::string started;  // UTC, ISO 8601
  std::string host;
  int64_t pid = 0;      // rank 0's
  bool owns_unmarked_checkpoints = false;  // adopted a folder from before run ids: checkpoints without one are ours
};
[[nodiscard]] RunIdentity new_run_identity();
[[nodiscard]] nlohmann::json to_json(const RunIdentity& identity);
// Error naming `source` and the field.
[[nodiscard]] RunIdentity run_identity_from_json(const nlohmann::json& json, const std::string& source);
// Whether a checkpoint with `checkpoint_run_id` belongs to the run `identity`.
[[nodiscard]] bool owns(const RunIdentity& identity, const std::optional<std::string>& checkpoint_run_id);

// Whether `output` holds a run's files that --overwrite-output-dir moved aside (NAME.run-OLDID): another run
// used the folder.
[[nodiscard]] bool another_run_moved_aside(const std::filesystem::path& output);

// The names in `output` that belong to some run (kRunOutputs, checkpoint-*), sorted; empty for a new or empty
// folder. The lock file does not count.
[[nodiscard]] std::vector<std::string> previous_run_files(const std::filesystem::path& output);

// An exclusive flock(2) on OUTPUT/run.lock for the object's lifetime. Error naming the folder and the
// holder's host/pid when another process holds it.
class RunFolderLock {
 public:
  RunFolderLock(const std::filesystem::path& output, const RunIdentity& holder);
  ~RunFolderLock();
  RunFolderLock(const RunFolderLock&) = delete;
  RunFolderLock& operator=(const RunFolderLock&) = delete;

 private:
  int fd_ = -1;
};

struct FolderClaim {
  std::string resume;      // --resume: "" (fresh), "auto" or a checkpoint folder (whose run id is continued)
  bool overwrite = false;  // --overwrite-output-dir
  // Top-level names inside OUTPUT that the user chose for this run's outputs (a --timeline file): moved aside with
  // the others by --overwrite-output-dir.
  std::vector<std::string> extra_outputs;
};

// The inputs of a run that must not lie inside what it writes (Note [Run outputs]), each with its option.
struct RunInput {
  std::string option;  // "--model"
  std::filesystem::path path;
};
// Error naming the option, the input and the output it lies in, when an input is (inside) one of OUTPUT's
// kRunOutputs, `extra_outputs`, or a checkpoint folder other than `resume_checkpoint` (the checkpoint --resume
// reads). Paths are compared resolved (symlinks, "..", relative spellings).
void check_run_inputs(const std::filesystem::path& output, const std::vector<RunInput>& inputs,
                      const std::vector<std::string>& extra_outputs, const std::filesystem::path& resume_checkpoint);

struct RunFolder {
  RunIdentity identity;
  std::unique_ptr<RunFolderLock> lock;  // rank 0 only
  std::vector<std::string> notes;       // what was adopted or moved aside, for the log
};

// Collective (Note [One run per folder]): rank 0 locks and claims `output` and writes run.json; every rank
// returns the identity (the lock lives in rank 0's result). Error on every rank when the folder is refused.
[[nodiscard]] RunFolder claim_run_folder(dist::Comm& comm, const std::filesystem::path& output, const FolderClaim& claim);

}  // namespace hpctrain::train
