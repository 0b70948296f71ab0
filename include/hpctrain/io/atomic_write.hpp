// Files and folders that exist only when complete: configs, weights, model folders (save_pretrained),
// checkpoints, trainer state.
#pragma once

#include <filesystem>
#include <functional>
#include <string_view>

namespace hpctrain::io {

// Builds `dir` atomically (Note [Complete checkpoints] in train/checkpoint.hpp): `fill` writes the files
// into an empty hidden sibling ".NAME.tmp-PID", which is fsynced and renamed to `dir`. An existing `dir`
// is first renamed aside (".NAME.deleting-PID") and removed only once the new one is in place; if the
// final rename fails, it is put back. So a crash leaves the old or the new folder (plus hidden debris,
// which train::remove_stale_temporaries clears), never a half-written one. On an exception from `fill`
// the temporary is removed and `dir` is untouched.
void write_folder_atomically(const std::filesystem::path& dir,
                             const std::function<void(const std::filesystem::path& tmp)>& fill);

// Writes `path` atomically: `contents` go to `path.tmp`, which is fsynced and renamed over `path`
// (Note [Mapped files stay valid] in src/io/file_util.hpp); on failure the temporary is removed.
void write_file_atomically(const std::filesystem::path& path, std::string_view contents);

// Removes `dir`: renamed to a hidden sibling (".NAME.deleting-PID") first, so a crash mid-removal never
// leaves a partial folder under its real name.
void remove_folder(const std::filesystem::path& dir);

// fsync of one file or folder (Error naming the path; folders on file systems that refuse it are skipped).
void sync_path(const std::filesystem::path& path);

}  // namespace hpctrain::io
