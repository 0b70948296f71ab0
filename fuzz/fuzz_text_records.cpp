// libFuzzer target: TextRecordReader (CSV, TSV, JSONL; plain or gzip) on arbitrary bytes.
// Input: byte 0 picks the format (bits 0-1) and the small block size (bits 2-7); the rest is the file.
// Oracle: the records do not depend on the block size the file is read in (16..79 bytes, exercising every refill
// and buffer-growth path, against one 64 KiB read, more than libFuzzer's inputs; before a read error, the records
// both runs saw), and for JSONL the flat fast path agrees with nlohmann on every line it accepts (Note [Flat JSON
// fast path]). A small max_record_bytes run exercises the resync after an over-long record.
#include "fuzz_util.hpp"
#include "hpctrain/data/text_records.hpp"
#include "data/flat_json.hpp"
#include "data/jsonl_parser.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <string_view>
#include <vector>

using hpctrain::data::TextFormat;
using hpctrain::data::TextReaderOptions;
using hpctrain::data::TextRecord;
using hpctrain::data::TextRecordReader;

namespace {

const std::vector<std::string> kFields = {"text", "label"};

// All records, or the Error message the reader threw (construction: header; next: I/O and gzip).
struct Outcome {
  std::vector<TextRecord> records;
  std::string error;
  bool read_error = false;  // the error was a ReadError (corrupt or truncated gzip, I/O)
};

Outcome read_all(const std::filesystem::path& path, TextFormat format, const TextReaderOptions& options) {
  Outcome out;
  try {
    TextRecordReader reader(path, format, kFields, options);
    TextRecord record;
    while (reader.next(record)) {
      out.records.push_back(record);
      HPCTRAIN_FUZZ_ASSERT(out.records.size() < (1u << 20), "more records than input bytes");
    }
  } catch (const hpctrain::ReadError& error) {
    out.error = error.what();
    out.read_error = true;
  } catch (const hpctrain::Error& error) {
    out.error = error.what();
  }
  return out;
}

std::string describe(const TextRecord& record) {
  std::string text = fmt::format("row {} line {} error '{}' fields", record.row, record.line, record.error);
  for (const auto& field : record.fields) text += field ? " '" + *field + "'" : " <missing>";
  return text;
}

// On a read error the outcome depends on how far ahead of the parser the reader got: the one-block run reads up to
// 64 KiB first and meets the error before the first record, while 17-byte reads hand out records first and may stop
// at a bad header or row that lies before the damage. So the errors are equal, or the one-block run's is a read
// error and the small-block run failed too; and the records both saw agree (one list is a prefix of the other).
// Without an error the records are equal.
void compare(const Outcome& small, const Outcome& large) {
  HPCTRAIN_FUZZ_ASSERT(small.error == large.error || (large.read_error && !small.error.empty()),
                       "small blocks: '" + small.error + "', one block: '" + large.error + "'");
  const bool failed = !small.error.empty();
  HPCTRAIN_FUZZ_ASSERT(failed || small.records.size() == large.records.size(),
                       fmt::format("{} records against {}", small.records.size(), large.records.size()));
  const std::size_t common = std::min(small.records.size(), large.records.size());
  for (std::size_t i = 0; i < common; ++i) {
    const TextRecord& a = small.records[i];
    const TextRecord& b = large.records[i];
    const bool same = a.row == b.row && a.line == b.line && a.error == b.error && (!a.error.empty() || a.fields == b.fields);
    HPCTRAIN_FUZZ_ASSERT(same, "small blocks: " + describe(a) + "\none block: " + describe(b));
  }
}

// Note [Flat JSON fast path]: when the fast path accepts a line, nlohmann accepts it with the same fields.
void check_fast_path(std::string_view text) {
  while (!text.empty()) {
    const std::size_t newline = text.find('\n');
    std::string_view line = text.substr(0, newline);
    text = newline == std::string_view::npos ? std::string_view() : text.substr(newline + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    std::vector<std::optional<std::string>> fast;
    if (!hpctrain::data::detail::parse_flat_object(line, kFields, fast)) continue;
    TextRecord reference;
    reference.fields.resize(kFields.size());
    hpctrain::data::detail::extract_with_nlohmann(line, kFields, reference);
    HPCTRAIN_FUZZ_ASSERT(reference.error.empty(), "fast path accepted a line nlohmann rejects: " + std::string(line) +
                                                      " (" + reference.error + ")");
    HPCTRAIN_FUZZ_ASSERT(reference.fields == fast, "fast path and nlohmann disagree on: " + std::string(line));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const TextFormat formats[] = {TextFormat::csv, TextFormat::tsv, TextFormat::jsonl, TextFormat::jsonl};
  static const hpctrain::fuzz::TempFile csv("records.csv"), tsv("records.tsv"), jsonl("records.jsonl");
  const TextFormat format = formats[data[0] & 3];
  const auto& file = format == TextFormat::csv ? csv : format == TextFormat::tsv ? tsv : jsonl;
  file.write(data + 1, size - 1);

  TextReaderOptions small;
  small.block_bytes = 16 + (data[0] >> 2);
  const Outcome in_pieces = read_all(file.path(), format, small);
  // 64 KiB rather than the default 1 MiB: ASan's quarantine makes every fresh 1 MiB buffer cost page faults.
  TextReaderOptions one_block;
  one_block.block_bytes = std::size_t{1} << 16;
  const Outcome at_once = read_all(file.path(), format, one_block);
  compare(in_pieces, at_once);

  TextReaderOptions bounded = small;
  bounded.max_record_bytes = 64;
  (void)read_all(file.path(), format, bounded);

  if (format == TextFormat::jsonl) check_fast_path({reinterpret_cast<const char*>(data + 1), size - 1});
  return 0;
}
