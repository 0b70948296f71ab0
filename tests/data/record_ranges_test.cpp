// Note [Record ranges]: a file read in byte ranges split by find_record_boundary gives the records of one whole read,
// with the same lines; CSV boundaries never fall inside a quoted field, JSONL ones ignore quotes.
#include <boost/test/unit_test.hpp>

#include <string>
#include <vector>

#include "fixtures.hpp"
#include "hpctrain/data/text_records.hpp"
#include "text_helpers.hpp"

using namespace hpctrain::data;
using namespace sources_test;

namespace {

// Reads `path` as `parts` ranges, as `prep text` ranks do: parity and lines from counts of the bytes before.
std::vector<TextRecord> read_in_ranges(const std::filesystem::path& path, const Strings& names, int parts, bool csv) {
  const auto size = std::filesystem::file_size(path);
  std::vector<RecordBoundary> boundaries;
  for (int k = 0; k <= parts; ++k) {
    const auto nominal = size * static_cast<uint64_t>(k) / static_cast<uint64_t>(parts);
    const auto before = count_quotes_and_newlines(path, 0, nominal);
    auto boundary = k == parts ? RecordBoundary{size, 0} : find_record_boundary(path, nominal, csv, before.quotes % 2 == 1);
    boundary.newlines += before.newlines;
    boundaries.push_back(boundary);
  }
  std::vector<TextRecord> records;
  for (int k = 0; k < parts; ++k) {
    TextReaderOptions options;
    options.range_begin = boundaries[k].offset;
    options.range_end = boundaries[k + 1].offset;
    options.first_line = 1 + boundaries[k].newlines;
    for (auto& record : read_all(path, names, options)) records.push_back(record);
  }
  return records;
}

void check_same(const std::vector<TextRecord>& whole, const std::vector<TextRecord>& parts) {
  BOOST_TEST_REQUIRE(whole.size() == parts.size());
  for (std::size_t i = 0; i < whole.size(); ++i) {
    BOOST_TEST(fields_of(whole[i]) == fields_of(parts[i]), tt::per_element());
    BOOST_TEST(whole[i].line == parts[i].line);
    BOOST_TEST(parts[i].error.empty());
  }
}

}  // namespace

BOOST_AUTO_TEST_SUITE(record_ranges)

BOOST_AUTO_TEST_CASE(csv_ranges_split_outside_quoted_fields) {
  TempDir dir;
  const auto path = dir / "multi.csv";
  std::string text = "label,text\n";
  for (int i = 0; i < 300; ++i) text += std::to_string(i % 3) + ",\"line " + std::to_string(i) + ", \"\"a\"\"\nnext\n\nlast\"\n";
  write_file(path, text);
  const auto whole = read_all(path, {"text", "label"});
  BOOST_TEST_REQUIRE(whole.size() == 300u);
  for (int parts : {2, 3, 7, 64}) check_same(whole, read_in_ranges(path, {"text", "label"}, parts, true));
}

BOOST_AUTO_TEST_CASE(jsonl_ranges_split_at_lines_whatever_the_quotes) {
  TempDir dir;
  const auto path = dir / "rows.jsonl";
  std::string text;
  for (int i = 0; i < 200; ++i) text += "{\"text\": \"say \\\"" + std::to_string(i) + "\\\" \\\"\", \"label\": \"x\"}\n" + (i % 5 ? "" : "\n");
  write_file(path, text);
  const auto whole = read_all(path, {"text", "label"});
  BOOST_TEST_REQUIRE(whole.size() == 200u);
  for (int parts : {2, 5, 33}) check_same(whole, read_in_ranges(path, {"text", "label"}, parts, false));
}

BOOST_AUTO_TEST_CASE(ranges_inside_the_header_start_after_it) {
  TempDir dir;
  const auto path = dir / "h.csv";
  write_file(path, "a_long_header_name,text\n1,x\n2,y\n");
  const auto whole = read_all(path, {"text"});
  check_same(whole, read_in_ranges(path, {"text"}, 30, true));
}

BOOST_AUTO_TEST_SUITE_END()
