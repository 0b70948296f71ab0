// The one check every command makes before writing a file: never one of its inputs, never an existing file
// without --overwrite (issue 12: "never overwrite an input").
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace hpctrain::io {

// Whether `a` and `b` name the same existing file (same st_dev and st_ino after following symlinks):
// other spellings, symlinks and hard links are caught. False when either does not exist.
[[nodiscard]] bool same_file(const std::filesystem::path& a, const std::filesystem::path& b);

// The regular files directly in `dir` (not recursive; empty when `dir` is not a folder): the inputs a
// command reads from a folder (a model or tokenizer folder, an MNIST folder).
[[nodiscard]] std::vector<std::filesystem::path> files_in(const std::filesystem::path& dir);

// Throws Error naming `flag` and the path when `output` is one of `inputs` (even with `overwrite`), is a
// folder, or exists and `overwrite` is false. Empty inputs are ignored. Call it before any work, and write
// to the path it returns: `output` resolved (fs::weakly_canonical), so that a spelling through a folder
// that does not exist yet ("new/../data.h5") is checked as the file it will name once created.
[[nodiscard]] std::filesystem::path check_output_file(const std::filesystem::path& output, const std::vector<std::filesystem::path>& inputs,
                       bool overwrite, const std::string& flag = "--output");

}  // namespace hpctrain::io
