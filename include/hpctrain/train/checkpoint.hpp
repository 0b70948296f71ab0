// The checkpoint folder protocol: Hugging Face Trainer's layout (OUTPUT/checkpoint-STEP/), names, listing,
// rotation of this run's own checkpoints, the checksum manifest and its verification, stale temporaries.
// What goes into a folder is the Accelerator's business (accelerator.hpp: save_state); tensor files are
// models/tensor_io.hpp; the run folder around the checkpoints is run_folder.hpp.
//
// Note [Complete checkpoints]
// A folder named checkpoint-STEP exists only when complete: it is assembled in a hidden sibling
// (".checkpoint-STEP.tmp-PID"), every file and the folder are fsynced, and one rename publishes it
// (the parent is fsynced after). Rotation renames a checkpoint to a hidden ".deleting" name before
// removing it, so a crash mid-removal never leaves a partial folder under a checkpoint name.
// list_checkpoints() also requires trainer_state.json, so a folder a user copied half-way is ignored.
//
// Note [Verified checkpoints]
// Complete is not intact: a flipped bit on disk or a file replaced by hand loads silently. save_state
// writes checksums.sha256 last (sha256sum's format: "HEX  NAME" per file, so `sha256sum -c` checks it)
// listing every other file of the folder. Before a resume reads anything, verify_checkpoint() rehashes
// every listed file and refuses a mismatch, a listed file that is missing, and an unlisted file of the
// kinds resume reads (*.json, *.safetensors*), naming the file. A checkpoint without a manifest (written
// before manifests existed) is accepted with a warning. `--resume auto` tries this run's checkpoints newest
// first and takes the first that verifies (resume_point.hpp: find_resume_point, Note [Never start over
// silently]); an explicit --resume DIR that fails is an error.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace hpctrain::train {

inline constexpr const char* kTrainerStateName = "trainer_state.json";
inline constexpr const char* kOptimizerName = "optimizer.safetensors";
inline constexpr const char* kModelWeightsName = "model.safetensors";
inline constexpr const char* kManifestName = "checksums.sha256";

// "checkpoint-STEP", and its inverse (nullopt for any other name).
[[nodiscard]] std::string checkpoint_name(int64_t step);
[[nodiscard]] std::optional<int64_t> parse_checkpoint_name(const std::string& name);

struct CheckpointEntry {
  int64_t step = 0;
  std::filesystem::path path;
  std::optional<std::string> run_id;  // trainer_state.json "hpctrain.run_id"; none: unreadable or older format
};
// Complete checkpoints in `output` (Note [Complete checkpoints]), by step ascending. Empty when the
// folder does not exist.
[[nodiscard]] std::vector<CheckpointEntry> list_checkpoints(const std::filesystem::path& output);
// The run id recorded in `dir`/trainer_state.json (nullopt when absent or unreadable).
[[nodiscard]] std::optional<std::string> checkpoint_run_id(const std::filesystem::path& dir);

// Whether a checkpoint with this recorded run id belongs to the current run (run_folder.hpp: owns()).
using OwnedBy = std::function<bool(const std::optional<std::string>& run_id)>;
// The complete checkpoints of `output` that `owned` accepts, by step ascending.
[[nodiscard]] std::vector<CheckpointEntry> own_checkpoints(const std::filesystem::path& output, const OwnedBy& owned);

// Removes the oldest of this run's checkpoints so that at most `keep` of them remain (keep <= 0: none
// removed). Other runs' checkpoints are never removed nor counted. Returns the removed folders.
std::vector<std::filesystem::path> rotate_checkpoints(const std::filesystem::path& output, int64_t keep,
                                                      const OwnedBy& owned);
// Removes hidden temporaries an interrupted save left in `output` (".NAME.tmp-PID", ".NAME.deleting-PID"
// of io::write_folder_atomically, e.g. of checkpoints and of final/). Only under the run folder's lock.
void remove_stale_temporaries(const std::filesystem::path& output);

// `path` renamed to NAME.TAG-ID (before the extension: "metrics.run-ID.jsonl", "checkpoint-4.run-ID",
// "checkpoint-6.damaged-ID"), a name no listing picks up; returns the new path. Error naming both when the
// rename fails.
std::filesystem::path move_aside(const std::filesystem::path& path, const std::string& id, const std::string& tag = "run");

// ---- The manifest (Note [Verified checkpoints]) ----
struct ManifestEntry {
  std::string sha256;  // 64 lowercase hex digits
  std::string name;    // relative to the checkpoint folder, '/'-separated, no ".."
};
// Lines "HEX  NAME" (or "HEX *NAME"); Error naming `source`, the line and what is wrong.
[[nodiscard]] std::vector<ManifestEntry> parse_manifest(const std::string& text, const std::string& source);
// Writes `dir`/checksums.sha256 for every other regular file under `dir` (sorted by name).
void write_manifest(const std::filesystem::path& dir);
// Verifies `dir` against its manifest; Error naming the file that fails. Returns "" when verified, or a
// warning when `dir` has no manifest (accepted: written before manifests existed).
[[nodiscard]] std::string verify_checkpoint(const std::filesystem::path& dir);

// verify_checkpoint(dir) (its warning logged), then dir/trainer_state.json's text; "" when the folder has
// none. The one verify-and-read path of a resume: resume_point.hpp and Accelerator::load_state use it.
[[nodiscard]] std::string read_verified_trainer_state(const std::filesystem::path& dir);

// Whole text files (Error naming the path); write_text does not sync (io::write_folder_atomically does).
void write_text(const std::filesystem::path& path, const std::string& contents);
[[nodiscard]] std::string read_text(const std::filesystem::path& path);

}  // namespace hpctrain::train
