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
//   --overwrite-output-dir  starts a new run there, deleting nothing of the old one: its run.json,
//                   trainer_state.json, metrics.jsonl and final/ are renamed NAME.run-OLDID at the start;
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

namespace hpctrain::train {

inline constexpr const char* kRunIdentityName = "run.json";
inline constexpr const char* kRunLockName = "run.lock";

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

// The names in `output` that belong to some run (run.json, trainer_state.json, metrics.jsonl, final,
// checkpoint-*), sorted; empty for a new or empty folder. The lock file does not count.
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
};

struct RunFolder {
  RunIdentity identity;
  std::unique_ptr<RunFolderLock> lock;  // rank 0 only
  std::vector<std::string> notes;       // what was adopted or moved aside, for the log
};

// Collective (Note [One run per folder]): rank 0 locks and claims `output` and writes run.json; every rank
// returns the identity (the lock lives in rank 0's result). Error on every rank when the folder is refused.
[[nodiscard]] RunFolder claim_run_folder(dist::Comm& comm, const std::filesystem::path& output, const FolderClaim& claim);

}  // namespace hpctrain::train
