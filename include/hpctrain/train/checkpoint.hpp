// Checkpoint folders in Hugging Face Trainer's layout (OUTPUT/checkpoint-STEP/), written atomically, and
// the helpers to find, rotate, save and broadcast their tensors. What goes into a folder is the
// Accelerator's business (accelerator.hpp: save_state); this header is about folders and files.
//
// Note [Complete checkpoints]
// A folder named checkpoint-STEP exists only when complete: it is assembled in a hidden sibling
// (".checkpoint-STEP.tmp-PID"), every file and the folder are fsynced, and one rename publishes it
// (the parent is fsynced after). Rotation renames a checkpoint to a hidden ".deleting" name before
// removing it, so a crash mid-removal never leaves a partial folder under a checkpoint name.
// list_checkpoints() also requires trainer_state.json, so a folder a user copied half-way is ignored.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "hpctrain/dist/comm.hpp"

namespace hpctrain::train {

using TensorMap = std::map<std::string, at::Tensor>;  // name -> tensor, sorted by name

inline constexpr const char* kTrainerStateName = "trainer_state.json";
inline constexpr const char* kOptimizerName = "optimizer.safetensors";
inline constexpr const char* kModelWeightsName = "model.safetensors";

// "checkpoint-STEP", and its inverse (nullopt for any other name).
[[nodiscard]] std::string checkpoint_name(int64_t step);
[[nodiscard]] std::optional<int64_t> parse_checkpoint_name(const std::string& name);

struct CheckpointEntry {
  int64_t step = 0;
  std::filesystem::path path;
};
// Complete checkpoints in `output` (Note [Complete checkpoints]), by step ascending. Empty when the
// folder does not exist.
[[nodiscard]] std::vector<CheckpointEntry> list_checkpoints(const std::filesystem::path& output);
[[nodiscard]] std::optional<std::filesystem::path> latest_checkpoint(const std::filesystem::path& output);

// Removes the oldest complete checkpoints so that at most `keep` remain (keep <= 0: none removed).
// Returns the removed folders.
std::vector<std::filesystem::path> rotate_checkpoints(const std::filesystem::path& output, int64_t keep);
// Removes hidden temporaries an interrupted save left in `output` (".NAME.tmp-PID", ".NAME.deleting-PID"
// of io::write_folder_atomically, e.g. of checkpoints and of final/).
void remove_stale_temporaries(const std::filesystem::path& output);

// Safetensors file of CPU copies of `tensors` ({"format": "pt"} metadata), and the inverse.
void save_tensor_file(const std::filesystem::path& path, const TensorMap& tensors);
[[nodiscard]] TensorMap load_tensor_file(const std::filesystem::path& path);

// Collective: `tensors` (CPU) as held by `root` arrive on every rank (names, shapes and dtypes first,
// then the bytes in fused broadcasts). Other ranks' input is ignored.
[[nodiscard]] TensorMap broadcast_tensors(dist::Comm& comm, const TensorMap& tensors, int root = 0);

// Strict copy of `source` into `target` by name (every name in both, same shapes; dtype converted).
// Error naming `what`, and every missing, unexpected and wrong-shaped tensor in one message.
void copy_tensors_strict(const TensorMap& source, const TensorMap& target, const std::string& what);

// Whole text files (Error naming the path); write_text does not sync (io::write_folder_atomically does).
void write_text(const std::filesystem::path& path, const std::string& contents);
[[nodiscard]] std::string read_text(const std::filesystem::path& path);

}  // namespace hpctrain::train
