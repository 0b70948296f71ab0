// Raw text-classification records from CSV, TSV or JSONL files (each optionally gzip-compressed), streamed.
// Extracts the requested columns / top-level JSON keys as strings; tokenizing and label mapping happen elsewhere.
// Does not: guess delimiters, read nested JSON keys, or convert encodings (CSV/TSV bytes are passed through;
// JSONL strings must be UTF-8, so invalid sequences read as U+FFFD: TextRecord::replaced_invalid_utf8).
#pragma once

#include <cstddef>
#include <cstdint>
#include <climits>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace hpctrain::data {

enum class TextFormat { csv, tsv, jsonl };

// From the file name: .csv/.tsv/.jsonl/.ndjson (any case), each optionally followed by .gz.
// Throws Error naming the file and the accepted extensions otherwise.
[[nodiscard]] TextFormat text_format_from_path(const std::filesystem::path& path);
[[nodiscard]] std::string_view to_string(TextFormat format);

struct TextRecord {
  std::int64_t row = 0;   // 0-based index among data records (header and blank lines excluded; malformed ones count)
  std::int64_t line = 0;  // 1-based physical line where the record starts (for messages)
  // One per requested field name, in that order; nullopt = missing (JSON: key absent or null).
  std::vector<std::optional<std::string>> fields;
  // Non-empty: the record is malformed and this says why ("unterminated quoted field ...", "expected 3 columns,
  // got 2", "malformed JSON: ..."); `fields` is then unspecified.
  std::string error;
  // JSONL: the line held invalid UTF-8, read with each invalid sequence as U+FFFD (CSV/TSV pass bytes through
  // and the tokenizer does the same replacement).
  bool replaced_invalid_utf8 = false;
};

// "file 'data/train.csv', line 17 (data row 15)": where a record came from, for error messages and warnings.
[[nodiscard]] std::string record_location(const std::filesystem::path& path, const TextRecord& record);

struct TextReaderOptions {
  std::size_t block_bytes = std::size_t{1} << 20;  // bytes read from the file at a time
  // A record longer than this (bytes, decompressed) is reported as malformed instead of buffered without bound;
  // this is what an unterminated quote in the middle of a large CSV file turns into.
  std::size_t max_record_bytes = std::size_t{64} << 20;
  // Note [Record ranges]: read only the records that start in [range_begin, range_end) (plain files; byte
  // offsets that find_record_boundary returned). The CSV/TSV header is still read from the start of the file;
  // a range that begins inside it begins after it. first_line is the 1-based line at range_begin (for messages);
  // rows count from 0 in each range.
  std::uint64_t range_begin = 0;
  std::uint64_t range_end = UINT64_MAX;
  std::int64_t first_line = 1;
  // JSONL: each record's single field is its whole line (a trailing '\r' dropped, invalid UTF-8 read as U+FFFD),
  // unparsed: for rows with nested values (prep sft's messages), which the caller parses itself.
  bool jsonl_whole_lines = false;
  // The file that messages (and path()) name when it is not the one read: a temporary holding the input's
  // decompressed content (Note [Splitting a gzip input] in src/prep/text_prep.cpp). Empty: the file read.
  std::filesystem::path display_path;
};

// Note [Record ranges]: the first offset >= `offset` where a record starts: right after a '\n' that is outside
// quotes (with `csv`, CSV/TSV quoting: `quoted` says whether `offset` lies inside a quoted field, by the parity of
// the '"' before it; JSONL records are lines, whatever their quotes), or the file size. Also returns the '\n' bytes skipped on the way, for line numbers.
struct RecordBoundary {
  std::uint64_t offset = 0;
  std::int64_t newlines = 0;
};
[[nodiscard]] RecordBoundary find_record_boundary(const std::filesystem::path& path, std::uint64_t offset, bool csv,
                                                   bool quoted);

// '"' and '\n' bytes in [begin, end) of a plain file: the pieces of the parity and line numbers above.
struct ByteCounts {
  std::int64_t quotes = 0;
  std::int64_t newlines = 0;
};
[[nodiscard]] ByteCounts count_quotes_and_newlines(const std::filesystem::path& path, std::uint64_t begin,
                                                   std::uint64_t end);
// Whether the file is gzip-compressed (by its magic bytes): such a file cannot be split into ranges.
[[nodiscard]] bool is_gzip_file(const std::filesystem::path& path);

// Streams records. Note [Text record resync]: a malformed record is returned with .error set and the reader
// carries on at the next physical line after the error (JSONL: the next line; CSV/TSV: the line after the one
// where the error was found), so callers can skip it (--skip-invalid) or stop with file:line in the message.
class TextRecordReader {
 public:
  // field_names: the columns (CSV/TSV header names) or top-level JSON keys to extract, in this order.
  // CSV/TSV: the first non-blank record is the header; a requested column that is not in it (or appears in it
  // twice) throws Error listing the available columns. A UTF-8 byte-order mark at the start is skipped.
  TextRecordReader(const std::filesystem::path& path, TextFormat format, std::vector<std::string> field_names,
                   const TextReaderOptions& options = {});
  ~TextRecordReader();
  TextRecordReader(TextRecordReader&&) noexcept;
  TextRecordReader& operator=(TextRecordReader&&) noexcept;

  // Fills `record` with the next record; false at the end of the file. Throws Error only for I/O and gzip errors.
  [[nodiscard]] bool next(TextRecord& record);

  // Bytes of the file read so far (compressed bytes for .gz): runs up to a block ahead of the records returned.
  [[nodiscard]] std::uint64_t bytes_consumed() const;
  [[nodiscard]] std::uint64_t file_size() const;
  [[nodiscard]] const std::filesystem::path& path() const;
  [[nodiscard]] TextFormat format() const;
  [[nodiscard]] const std::vector<std::string>& field_names() const;
  // CSV/TSV: the header's column names, in file order; JSONL: empty.
  [[nodiscard]] const std::vector<std::string>& columns() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace hpctrain::data
