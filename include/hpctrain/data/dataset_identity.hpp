// What identifies a dataset file independently of its path (Note [Agreed options]): ranks on different
// nodes may mount one file at different paths, so they compare these named facts instead of the text
// of --data. Cheap: the root attributes, the splits' sizes and the first examples of each split.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "hpctrain/data/dataset_reader.hpp"

namespace hpctrain::data {

// (name, value) pairs in a fixed order: "file size", "schema version", "task", "label names", "splits"
// (name and examples each), "content digest" (SHA-256 of the tokenizer, source and created_by
// attributes, every split's shape, and the labels and tokens or pixels of its first examples).
[[nodiscard]] std::vector<std::pair<std::string, std::string>> dataset_identity(const DatasetReader& reader);

}  // namespace hpctrain::data
