// `hpctrain inspect FILE.h5`: what a dataset file holds — schema, splits, counts, label histogram,
// token-length statistics, tokenizer — as JSON (for scripts) or as text (for people).
#pragma once

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

namespace hpctrain::prep {

// Reads the file's attributes and per-split statistics; with `validate`, also runs the full
// validation of every split (offsets, token ids, labels) and records the result.
nlohmann::json summarize_dataset(const std::filesystem::path& path, bool validate);

// The summary as aligned text lines.
std::string format_dataset_summary(const nlohmann::json& summary);

}  // namespace hpctrain::prep
