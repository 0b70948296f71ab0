// TextRecordReader: owns the byte buffer and the line/row counters; the per-format parsers see one record at a time.
#include "hpctrain/data/text_records.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <optional>

#include "csv_parser.hpp"
#include "hpctrain/core/error.hpp"
#include "hpctrain/data/byte_source.hpp"
#include "jsonl_parser.hpp"
#include "record_scan.hpp"

namespace hpctrain::data {
namespace {

bool ends_with(const std::string& text, std::string_view suffix) {
  return text.size() >= suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string lowercase(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return std::tolower(c); });
  return text;
}

constexpr std::string_view kUtf8Bom = "\xEF\xBB\xBF";

}  // namespace

TextFormat text_format_from_path(const std::filesystem::path& path) {
  std::string name = lowercase(path.filename().string());
  if (ends_with(name, ".gz")) name.resize(name.size() - 3);
  if (ends_with(name, ".csv")) return TextFormat::csv;
  if (ends_with(name, ".tsv")) return TextFormat::tsv;
  if (ends_with(name, ".jsonl") || ends_with(name, ".ndjson")) return TextFormat::jsonl;
  fail(
      "cannot tell the text format of '{}' from its name: expected an extension .csv, .tsv, .jsonl or .ndjson "
      "(optionally followed by .gz)",
      path.string());
}

std::string_view to_string(TextFormat format) {
  switch (format) {
    case TextFormat::csv: return "csv";
    case TextFormat::tsv: return "tsv";
    case TextFormat::jsonl: return "jsonl";
  }
  return "unknown";
}

std::string record_location(const std::filesystem::path& path, const TextRecord& record) {
  return fmt::format("file '{}', line {} (data row {})", path.string(), record.line, record.row);
}

struct TextRecordReader::Impl {
  enum class Outcome { record, end, too_long };

  Impl(const std::filesystem::path& file, TextFormat text_format, std::vector<std::string> names,
       const TextReaderOptions& reader_options)
      : format(text_format),
        field_names(std::move(names)),
        options(reader_options),
        source(file, reader_options.block_bytes),
        buffer(std::max<std::size_t>(reader_options.block_bytes, 1)) {}

  // Moves the unread bytes to the front, grows the buffer if they fill it, and reads more of the file.
  void fill() {
    if (at_eof) return;
    if (begin > 0) {
      std::memmove(buffer.data(), buffer.data() + begin, end - begin);
      base += begin;
      end -= begin;
      begin = 0;
    }
    if (end == buffer.size()) buffer.resize(buffer.size() * 2);
    const std::size_t wanted = buffer.size() - end;
    const std::size_t got = source.read(buffer.data() + end, wanted);
    end += got;
    if (got < wanted) at_eof = true;
  }

  // Runs `parse` on the unread bytes until it yields a record, refilling as it asks; blank lines are consumed.
  template <typename Parse>
  Outcome scan(Parse&& parse) {
    for (;;) {
      if (base + begin >= limit) return Outcome::end;
      if (begin == end) {
        if (at_eof) return Outcome::end;
        fill();
        continue;
      }
      const detail::Scan result = parse(buffer.data() + begin, buffer.data() + end, at_eof);
      if (result.status == detail::ScanStatus::need_more) {
        HPCTRAIN_CHECK(!at_eof, "internal error: {} parser asked for more data at the end of '{}'", to_string(format),
                       path().string());
        if (end - begin >= options.max_record_bytes) return Outcome::too_long;
        fill();
        continue;
      }
      begin += result.bytes;
      line += result.newlines;
      if (result.status == detail::ScanStatus::record) return Outcome::record;
    }
  }

  // Discards bytes up to and including the next '\n' (Note [Text record resync]).
  void skip_line() {
    for (;;) {
      const char* first = buffer.data() + begin;
      const void* newline = std::memchr(first, '\n', end - begin);
      if (newline != nullptr) {
        begin += static_cast<std::size_t>(static_cast<const char*>(newline) - first) + 1;
        ++line;
        return;
      }
      begin = end;
      if (at_eof) return;
      fill();
    }
  }

  void skip_bom() {
    while (end - begin < kUtf8Bom.size() && !at_eof) fill();
    if (end - begin >= kUtf8Bom.size() && std::memcmp(buffer.data() + begin, kUtf8Bom.data(), kUtf8Bom.size()) == 0) {
      begin += kUtf8Bom.size();
    }
  }

  void read_header() {
    std::string error;
    std::int64_t header_line = line;
    const Outcome outcome = scan([&](const char* first, const char* last, bool eof) {
      header_line = line;
      return csv->parse_header(first, last, eof, line, columns, error);
    });
    const char* kind = format == TextFormat::tsv ? "TSV" : "CSV";
    HPCTRAIN_CHECK(outcome != Outcome::end, "{} file '{}' is empty: expected a header row naming the columns [{}]",
                   kind, path().string(), fmt::join(field_names, ", "));
    HPCTRAIN_CHECK(outcome != Outcome::too_long, "{} file '{}': the header row is longer than {} bytes", kind,
                   path().string(), options.max_record_bytes);
    HPCTRAIN_CHECK(error.empty(), "{} file '{}', line {}: malformed header row: {}", kind, path().string(), header_line,
                   error);
    csv->bind(path(), columns, field_names);
  }

  bool next(TextRecord& record) {
    record.fields.resize(field_names.size());
    record.line = line;
    const Outcome outcome = scan([&](const char* first, const char* last, bool eof) {
      record.line = line;  // blank lines before the record move its start
      return csv ? csv->parse(first, last, eof, record) : jsonl->parse(first, last, eof, record);
    });
    if (outcome == Outcome::end) return false;
    if (outcome == Outcome::too_long) {
      record.error = fmt::format("record is longer than {} bytes (max_record_bytes){}", options.max_record_bytes,
                                 csv ? "; an unterminated quoted field?" : "");
      skip_line();
    }
    record.row = row++;
    return true;
  }

  // Note [Record ranges]: after the header, jump to the range's first record.
  void enter_range() {
    const std::uint64_t position = base + begin;
    limit = std::max(options.range_end, position);
    if (options.range_begin <= position) return;
    source.seek(options.range_begin);
    base = options.range_begin;
    begin = end = 0;
    at_eof = false;
    line = options.first_line;
  }

  // The file named in messages (TextReaderOptions::display_path).
  const std::filesystem::path& path() const { return options.display_path.empty() ? source.path() : options.display_path; }

  TextFormat format;
  std::vector<std::string> field_names;
  TextReaderOptions options;
  ByteSource source;
  std::vector<char> buffer;
  std::size_t begin = 0;  // unread bytes are buffer[begin, end)
  std::size_t end = 0;
  std::uint64_t base = 0;              // content offset of buffer[0]
  std::uint64_t limit = UINT64_MAX;    // records starting at or after this offset are not read
  bool at_eof = false;    // the source has nothing more after buffer[end]
  std::int64_t line = 1;  // 1-based line of buffer[begin]
  std::int64_t row = 0;   // data records returned so far
  std::vector<std::string> columns;
  std::optional<detail::CsvParser> csv;
  std::optional<detail::JsonlParser> jsonl;
};

TextRecordReader::TextRecordReader(const std::filesystem::path& path, TextFormat format,
                                   std::vector<std::string> field_names, const TextReaderOptions& options) {
  HPCTRAIN_CHECK(!field_names.empty(), "reading '{}': expected at least one field name to extract", path.string());
  for (std::size_t i = 0; i < field_names.size(); ++i) {
    for (std::size_t j = 0; j < i; ++j) {
      HPCTRAIN_CHECK(field_names[i] != field_names[j], "reading '{}': field '{}' is requested twice in [{}]",
                     path.string(), field_names[i], fmt::join(field_names, ", "));
    }
  }
  impl_ = std::make_unique<Impl>(path, format, std::move(field_names), options);
  impl_->skip_bom();
  if (format == TextFormat::jsonl) {
    HPCTRAIN_CHECK(!options.jsonl_whole_lines || impl_->field_names.size() == 1,
                   "reading '{}': whole lines are one field, got {} names", path.string(), impl_->field_names.size());
    impl_->jsonl.emplace(impl_->field_names, options.jsonl_whole_lines);
  } else {
    impl_->csv.emplace(format == TextFormat::tsv ? '\t' : ',');
    impl_->read_header();
  }
  impl_->enter_range();
}

TextRecordReader::~TextRecordReader() = default;
TextRecordReader::TextRecordReader(TextRecordReader&&) noexcept = default;
TextRecordReader& TextRecordReader::operator=(TextRecordReader&&) noexcept = default;

bool TextRecordReader::next(TextRecord& record) { return impl_->next(record); }
std::uint64_t TextRecordReader::bytes_consumed() const { return impl_->source.bytes_consumed(); }
std::uint64_t TextRecordReader::file_size() const { return impl_->source.file_size(); }
const std::filesystem::path& TextRecordReader::path() const { return impl_->path(); }
TextFormat TextRecordReader::format() const { return impl_->format; }
const std::vector<std::string>& TextRecordReader::field_names() const { return impl_->field_names; }
const std::vector<std::string>& TextRecordReader::columns() const { return impl_->columns; }

namespace {

// Calls visit(block, size, file offset of block) for [begin, end) of a plain file, in 1 MiB blocks, until it
// returns false.
template <typename Visit>
void for_blocks(const std::filesystem::path& path, std::uint64_t begin, std::uint64_t end, Visit&& visit) {
  ByteSource source(path);
  source.seek(begin);
  std::vector<char> block(std::size_t{1} << 20);
  for (std::uint64_t at = begin; at < end;) {
    const std::size_t got = source.read(block.data(), static_cast<std::size_t>(std::min<std::uint64_t>(block.size(), end - at)));
    if (got == 0 || !visit(block.data(), got, at)) return;
    at += got;
  }
}

}  // namespace

bool is_gzip_file(const std::filesystem::path& path) { return ByteSource(path, 16).is_gzip(); }

ByteCounts count_quotes_and_newlines(const std::filesystem::path& path, std::uint64_t begin, std::uint64_t end) {
  ByteCounts counts;
  for_blocks(path, begin, end, [&](const char* block, std::size_t size, std::uint64_t) {
    counts.quotes += std::count(block, block + size, '"');
    counts.newlines += std::count(block, block + size, '\n');
    return true;
  });
  return counts;
}

namespace {
// A record starts at `offset` when the byte before it is a '\n' outside quotes.
bool starts_record(const std::filesystem::path& path, std::uint64_t offset, bool quoted) {
  bool newline = false;
  for_blocks(path, offset - 1, offset, [&](const char* block, std::size_t, std::uint64_t) { return newline = *block == '\n', false; });
  return newline && !quoted;
}
}  // namespace

RecordBoundary find_record_boundary(const std::filesystem::path& path, std::uint64_t offset, bool csv, bool quoted) {
  RecordBoundary boundary{std::filesystem::file_size(path), 0};
  quoted = csv && quoted;
  if (offset == 0) return {0, 0};
  if (offset >= boundary.offset) return boundary;
  if (starts_record(path, offset, quoted)) return {offset, 0};
  for_blocks(path, offset, boundary.offset, [&](const char* block, std::size_t size, std::uint64_t at) {
    for (std::size_t i = 0; i < size; ++i) {
      if (csv && block[i] == '"') quoted = !quoted;
      if (block[i] != '\n') continue;
      ++boundary.newlines;
      if (!quoted) {
        boundary.offset = at + i + 1;
        return false;
      }
    }
    return true;
  });
  return boundary;
}

}  // namespace hpctrain::data
