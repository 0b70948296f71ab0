// CSV/TSV record scanning. Fast path: an unquoted field is a table-driven scan to the next delimiter/line end and
// only requested columns are copied; quoted fields jump between quotes with memchr.
#include "csv_parser.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstring>

#include "hpctrain/core/error.hpp"

namespace hpctrain::data::detail {
namespace {

enum class CsvError { none, stray_quote, text_after_quote, unterminated_quote };

struct CsvScan {
  Scan scan;
  std::size_t columns = 0;  // fields seen in the record
  CsvError error = CsvError::none;
  std::size_t error_column = 0;       // 0-based column where the error was found
  char error_char = 0;                // text_after_quote: the offending byte
  std::int64_t error_line_delta = 0;  // line breaks between the record start and the error (or the opening quote)
};

CsvScan need_more() { return CsvScan{}; }

// Scans one record starting at `begin`; calls on_field(column, first, last, has_escaped_quotes) for each field,
// where [first, last) is the field's text without its surrounding quotes (escaped "" still doubled).
// Returns need_more when the record may continue past `end` and more data can come (!at_eof).
template <typename OnField>
CsvScan scan_record(const char* begin, const char* end, bool at_eof, char delimiter,
                    const std::array<bool, 256>& stops_unquoted, OnField&& on_field) {
  CsvScan out;
  std::int64_t newlines = 0;
  // Consumes the line terminator at `t` ('\n', '\r\n' or a lone '\r') and completes the record.
  auto finish_at_terminator = [&](const char* t) -> CsvScan {
    std::size_t terminator = 1;
    if (*t == '\r') {
      if (t + 1 == end && !at_eof) return need_more();  // can't tell "\r" from "\r\n" yet
      if (t + 1 < end && t[1] == '\n') terminator = 2;
    }
    out.scan = Scan{ScanStatus::record, static_cast<std::size_t>(t - begin) + terminator, newlines + 1};
    return out;
  };
  // After an error: skip to just past the next '\n' (Note [Text record resync]).
  auto fail_and_resync = [&](CsvError error, const char* at, std::size_t column) -> CsvScan {
    out.error = error;
    out.error_column = column;
    out.error_line_delta = newlines;
    const char* newline = static_cast<const char*>(std::memchr(at, '\n', static_cast<std::size_t>(end - at)));
    if (newline == nullptr && !at_eof) return need_more();
    const char* resume = newline != nullptr ? newline + 1 : end;
    out.scan = Scan{ScanStatus::record, static_cast<std::size_t>(resume - begin), newlines + (newline ? 1 : 0)};
    return out;
  };

  // A record that is an empty line is skipped (like Python's csv module).
  if (*begin == '\n' || *begin == '\r') {
    CsvScan blank = finish_at_terminator(begin);
    if (blank.scan.status == ScanStatus::record) blank.scan.status = ScanStatus::blank;
    return blank;
  }

  const char* p = begin;
  std::size_t column = 0;
  for (;;) {
    if (p == end) {
      // Only reachable after a delimiter: the record's last field is empty.
      if (!at_eof) return need_more();
      on_field(column++, p, p, false);
      out.columns = column;
      out.scan = Scan{ScanStatus::record, static_cast<std::size_t>(p - begin), newlines};
      return out;
    }
    if (*p != '"') {
      const char* q = p;
      while (q < end && !stops_unquoted[static_cast<unsigned char>(*q)]) ++q;
      if (q == end) {
        if (!at_eof) return need_more();
        on_field(column++, p, q, false);
        out.columns = column;
        out.scan = Scan{ScanStatus::record, static_cast<std::size_t>(q - begin), newlines};
        return out;
      }
      if (*q == '"') return fail_and_resync(CsvError::stray_quote, q, column);
      on_field(column++, p, q, false);
      if (*q == delimiter) {
        p = q + 1;
        continue;
      }
      out.columns = column;
      return finish_at_terminator(q);  // '\n' or '\r'
    }

    // Quoted field: jump from quote to quote; "" is an escaped quote, any other quote closes the field.
    const char* content = p + 1;
    const char* q = content;
    bool escaped = false;
    const char* closing = nullptr;
    while (closing == nullptr) {
      const char* quote = static_cast<const char*>(std::memchr(q, '"', static_cast<std::size_t>(end - q)));
      if (quote == nullptr) {
        if (!at_eof) return need_more();
        // Unterminated at the end of the file: the rest of the file is this record.
        out.error = CsvError::unterminated_quote;
        out.error_column = column;
        out.error_line_delta = newlines;
        out.scan =
            Scan{ScanStatus::record, static_cast<std::size_t>(end - begin), newlines + std::count(content, end, '\n')};
        return out;
      }
      if (quote + 1 == end && !at_eof) return need_more();  // can't tell a closing quote from "" yet
      if (quote + 1 < end && quote[1] == '"') {
        escaped = true;
        q = quote + 2;
      } else {
        closing = quote;
      }
    }
    on_field(column++, content, closing, escaped);
    const std::int64_t field_newlines = std::count(content, closing, '\n');
    p = closing + 1;
    if (p == end) {  // at_eof here: the quote-lookahead above asked for more otherwise
      newlines += field_newlines;
      out.columns = column;
      out.scan = Scan{ScanStatus::record, static_cast<std::size_t>(p - begin), newlines};
      return out;
    }
    if (*p == delimiter) {
      newlines += field_newlines;
      ++p;
      continue;
    }
    if (*p == '\n' || *p == '\r') {
      newlines += field_newlines;
      out.columns = column;
      return finish_at_terminator(p);
    }
    out.error_char = *p;
    newlines += field_newlines;
    return fail_and_resync(CsvError::text_after_quote, p, column - 1);
  }
}

void assign_field(std::optional<std::string>& field, const char* first, const char* last, bool escaped) {
  if (!field) field.emplace();
  if (!escaped) {
    field->assign(first, last);
    return;
  }
  field->clear();
  // Copy runs up to and including each quote, then skip its double ("" -> ").
  for (const char* c = first; c < last;) {
    const char* quote = static_cast<const char*>(std::memchr(c, '"', static_cast<std::size_t>(last - c)));
    if (quote == nullptr) {
      field->append(c, last);
      break;
    }
    field->append(c, quote + 1);
    c = quote + 2;
  }
}

std::string unescape(const char* first, const char* last, bool escaped) {
  std::optional<std::string> field;
  assign_field(field, first, last, escaped);
  return std::move(*field);
}

std::string printable(char c) {
  if (c == '\t') return "\\t";
  if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return fmt::format("\\x{:02x}", static_cast<unsigned char>(c));
  return std::string(1, c);
}

// The message for a quoting error; `line` is where the record starts, `columns` the header names (if known).
std::string describe(const CsvScan& scan, const std::vector<std::string>& columns, char delimiter, std::int64_t line) {
  const std::size_t column = scan.error_column;
  const std::string column_name = column < columns.size() ? fmt::format("column {} ('{}')", column + 1, columns[column])
                                                          : fmt::format("column {}", column + 1);
  const std::int64_t error_line = line + scan.error_line_delta;
  switch (scan.error) {
    case CsvError::stray_quote:
      return fmt::format(
          "stray '\"' inside the unquoted field of {} on line {}; expected the whole field quoted with inner quotes "
          "doubled (\"\")",
          column_name, error_line);
    case CsvError::text_after_quote:
      return fmt::format("unexpected '{}' after the closing quote of {} on line {}; expected '{}' or end of line",
                         printable(scan.error_char), column_name, error_line, printable(delimiter));
    case CsvError::unterminated_quote:
      return fmt::format(
          "unterminated quoted field: the quote opening {} on line {} is never closed before the end of the file",
          column_name, error_line);
    case CsvError::none: break;
  }
  return {};
}

}  // namespace

CsvParser::CsvParser(char delimiter) : delimiter_(delimiter) {
  for (const char c : {delimiter, '"', '\n', '\r'}) stops_unquoted_[static_cast<unsigned char>(c)] = true;
}

Scan CsvParser::parse_header(const char* begin, const char* end, bool at_eof, std::int64_t line,
                             std::vector<std::string>& columns, std::string& error) const {
  columns.clear();
  error.clear();
  const CsvScan scan = scan_record(begin, end, at_eof, delimiter_, stops_unquoted_,
                                   [&](std::size_t, const char* first, const char* last, bool escaped) {
                                     columns.push_back(unescape(first, last, escaped));
                                   });
  if (scan.error != CsvError::none) error = describe(scan, {}, delimiter_, line);
  return scan.scan;
}

void CsvParser::bind(const std::filesystem::path& path, const std::vector<std::string>& columns,
                     const std::vector<std::string>& field_names) {
  columns_ = columns;
  slot_of_column_.assign(columns.size(), -1);
  const char* format = delimiter_ == '\t' ? "TSV" : "CSV";
  for (std::size_t slot = 0; slot < field_names.size(); ++slot) {
    const std::string& name = field_names[slot];
    const auto found = std::find(columns.begin(), columns.end(), name);
    if (found == columns.end()) {
      fail(
          "{} file '{}' has no column '{}': the header has columns [{}]; choose one of those (names are "
          "case-sensitive)",
          format, path.string(), name, fmt::join(columns, ", "));
    }
    const auto column = static_cast<std::size_t>(found - columns.begin());
    if (std::find(found + 1, columns.end(), name) != columns.end()) {
      fail("{} file '{}' has column '{}' more than once in its header [{}]; expected each requested column once",
           format, path.string(), name, fmt::join(columns, ", "));
    }
    HPCTRAIN_CHECK(slot_of_column_[column] < 0, "column '{}' of '{}' was requested twice", name, path.string());
    slot_of_column_[column] = static_cast<int>(slot);
  }
}

Scan CsvParser::parse(const char* begin, const char* end, bool at_eof, TextRecord& record) const {
  record.error.clear();
  const std::size_t header_columns = slot_of_column_.size();
  const CsvScan scan = scan_record(begin, end, at_eof, delimiter_, stops_unquoted_,
                                   [&](std::size_t column, const char* first, const char* last, bool escaped) {
                                     if (column >= header_columns) return;
                                     const int slot = slot_of_column_[column];
                                     if (slot >= 0) assign_field(record.fields[slot], first, last, escaped);
                                   });
  if (scan.scan.status == ScanStatus::need_more || scan.scan.status == ScanStatus::blank) return scan.scan;

  if (scan.error != CsvError::none) {
    record.error = describe(scan, columns_, delimiter_, record.line);
  } else if (scan.columns != header_columns) {
    record.error = fmt::format("expected {} columns (as in the header), got {}", header_columns, scan.columns);
  }
  return scan.scan;
}

}  // namespace hpctrain::data::detail
