// Test helpers for text records: read a whole file, flatten fields for comparison, generate random CSV/TSV.
#pragma once

#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <exception>
#include <filesystem>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "hpctrain/core/error.hpp"
#include "hpctrain/data/text_records.hpp"

namespace sources_test {

namespace tt = boost::test_tools;
using Strings = std::vector<std::string>;

inline std::vector<hpctrain::data::TextRecord> read_all(const std::filesystem::path& path, Strings names,
                                                        const hpctrain::data::TextReaderOptions& options = {}) {
  hpctrain::data::TextRecordReader reader(path, hpctrain::data::text_format_from_path(path), std::move(names), options);
  std::vector<hpctrain::data::TextRecord> records;
  hpctrain::data::TextRecord record;
  while (reader.next(record)) records.push_back(record);
  return records;
}

// Fields as plain strings; a missing field shows as "<missing>".
inline Strings fields_of(const hpctrain::data::TextRecord& record) {
  Strings out;
  for (const auto& field : record.fields) out.push_back(field ? *field : "<missing>");
  return out;
}

inline std::vector<std::int64_t> rows_of(const std::vector<hpctrain::data::TextRecord>& records) {
  std::vector<std::int64_t> out;
  for (const auto& record : records) out.push_back(record.row);
  return out;
}

inline std::vector<std::int64_t> lines_of(const std::vector<hpctrain::data::TextRecord>& records) {
  std::vector<std::int64_t> out;
  for (const auto& record : records) out.push_back(record.line);
  return out;
}

inline bool contains(const std::string& text, std::string_view part) { return text.find(part) != std::string::npos; }

// The message of the hpctrain::Error thrown by fn, or "<no error thrown>".
template <typename Fn>
std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (const hpctrain::Error& error) {
    return error.what();
  }
  return "<no error thrown>";
}

struct ExpectedRecord {
  Strings fields;  // label, text
  std::int64_t line = 0;
};

struct GeneratedFile {
  std::string content;
  std::vector<ExpectedRecord> records;
};

// A header "text<d>label" and `count` random rows, quoted where needed (and sometimes where not), with LF or CRLF
// line ends chosen per row.
inline GeneratedFile generate_delimited(std::mt19937& rng, char delimiter, int count) {
  const std::vector<std::string> pieces = {
      "a",    "word", " ", std::string(1, delimiter), "\"", "\n", "\r\n", "caf\xC3\xA9", "\xE6\xBC\xA2", "''",
      "x\"y", ",",    "\t"};
  auto random_text = [&] {
    std::string text;
    const int length = std::uniform_int_distribution<int>(0, 12)(rng);
    for (int i = 0; i < length; ++i)
      text += pieces[std::uniform_int_distribution<std::size_t>(0, pieces.size() - 1)(rng)];
    return text;
  };
  auto encode = [&](const std::string& field, std::int64_t& newlines) {
    const bool needs_quotes = field.find_first_of(std::string("\"\r\n") + delimiter) != std::string::npos;
    const bool quote = needs_quotes || std::uniform_int_distribution<int>(0, 3)(rng) == 0;
    for (const char c : field) newlines += c == '\n';
    if (!quote) return field;
    std::string out = "\"";
    for (const char c : field) out += c == '"' ? std::string("\"\"") : std::string(1, c);
    return out + "\"";
  };
  GeneratedFile file;
  file.content = std::string("text") + delimiter + "label\n";
  std::int64_t line = 2;
  for (int i = 0; i < count; ++i) {
    ExpectedRecord record;
    const std::string text = random_text();
    const std::string label = std::to_string(i % 5);
    record.fields = {label, text};
    record.line = line;
    std::int64_t newlines = 0;
    file.content += encode(text, newlines) + delimiter + encode(label, newlines);
    file.content += std::uniform_int_distribution<int>(0, 1)(rng) == 0 ? "\n" : "\r\n";
    // A row whose only field would be empty is a blank line; the text column keeps rows non-blank here
    // because there are always two columns (a delimiter is always written).
    line += newlines + 1;
    file.records.push_back(record);
  }
  return file;
}

}  // namespace sources_test
