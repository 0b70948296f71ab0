// Private: RFC 4180 record parser for CSV and TSV (same quoting rules, like Python's csv module), one record
// at a time from a byte range. Accepts LF, CRLF and lone-CR line ends, quoted fields with "" escapes and
// embedded line breaks. Rejects a quote inside an unquoted field, text after a closing quote, an unterminated
// quote, and a row whose column count differs from the header's.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "hpctrain/data/text_records.hpp"
#include "record_scan.hpp"

namespace hpctrain::data::detail {

class CsvParser {
 public:
  explicit CsvParser(char delimiter);

  // Parses the header record, starting on `line`, into `columns` (all of them, unescaped); `error` is set if it
  // is malformed.
  [[nodiscard]] Scan parse_header(const char* begin, const char* end, bool at_eof, std::int64_t line,
                                  std::vector<std::string>& columns, std::string& error) const;

  // Maps each requested name to its header column. Throws Error listing the available columns when a name is
  // missing from the header or appears in it more than once.
  void bind(const std::filesystem::path& path, const std::vector<std::string>& columns,
            const std::vector<std::string>& field_names);

  // Parses one data record: fills record.fields (bind() first) or record.error. record.line must already hold
  // the line the record starts on (used in error messages).
  [[nodiscard]] Scan parse(const char* begin, const char* end, bool at_eof, TextRecord& record) const;

 private:
  char delimiter_;
  std::array<bool, 256> stops_unquoted_{};  // bytes that end (or break) an unquoted field
  std::vector<std::string> columns_;        // header names, for messages
  std::vector<int> slot_of_column_;         // header column -> index in record.fields, -1 when not requested
};

}  // namespace hpctrain::data::detail
