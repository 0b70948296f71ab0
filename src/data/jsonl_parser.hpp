// Private: JSON Lines record parser: one JSON object per line; extracts the requested top-level keys as strings.
// Strings are taken as is, integers rendered in decimal, floats as written in the file ("1.50" stays "1.50"),
// booleans as "true"/"false"; null and absent keys are missing; an array or object value is malformed.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "hpctrain/data/text_records.hpp"
#include "record_scan.hpp"

namespace hpctrain::data::detail {

class JsonlParser {
 public:
  // whole_lines: the one field is the line itself (TextReaderOptions::jsonl_whole_lines).
  explicit JsonlParser(std::vector<std::string> field_names, bool whole_lines = false);

  // Parses the line at `begin` (up to '\n'; a trailing '\r' is dropped). Lines of only whitespace are blank.
  [[nodiscard]] Scan parse(const char* begin, const char* end, bool at_eof, TextRecord& record) const;

 private:
  std::vector<std::string> field_names_;
  bool whole_lines_ = false;
};

// The reference path: extracts the fields of one line (no terminator) with nlohmann's SAX parser, setting
// record.error when the line is malformed.
void extract_with_nlohmann(std::string_view line, const std::vector<std::string>& field_names, TextRecord& record);

}  // namespace hpctrain::data::detail
