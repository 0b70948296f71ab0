#include "hpctrain/data/dataset_schema.hpp"

#include <algorithm>

#include "hpctrain/core/error.hpp"

namespace hpctrain::data {

std::string_view to_string(Task task) {
  switch (task) {
    case Task::text_classification: return "text-classification";
    case Task::image_classification: return "image-classification";
    case Task::causal_lm: return "causal-lm";
  }
  return "?";
}

std::string_view to_string(Compression compression) {
  switch (compression) {
    case Compression::none: return "none";
    case Compression::gzip: return "gzip";
  }
  return "?";
}

Task parse_task(std::string_view text) {
  for (Task task : {Task::text_classification, Task::image_classification, Task::causal_lm}) {
    if (text == to_string(task)) return task;
  }
  fail("unknown task '{}': expected text-classification, image-classification or causal-lm", text);
}

Compression parse_compression(std::string_view text) {
  for (Compression compression : {Compression::none, Compression::gzip}) {
    if (text == to_string(compression)) return compression;
  }
  fail("unknown compression '{}': expected none or gzip", text);
}

bool is_known_split(std::string_view split) {
  return std::find(schema::kSplitNames.begin(), schema::kSplitNames.end(), split) != schema::kSplitNames.end();
}

}  // namespace hpctrain::data
