// JSONL reading: value types, malformed lines and resync, blank lines, BOM/CRLF, gzip and buffering.
#include <boost/test/unit_test.hpp>
#include <nlohmann/json.hpp>

#include <random>
#include <string>
#include <vector>

#include "fixtures.hpp"
#include "hpctrain/data/text_records.hpp"
#include "text_helpers.hpp"

using namespace hpctrain::data;
using namespace sources_test;

BOOST_AUTO_TEST_SUITE(jsonl)

BOOST_AUTO_TEST_CASE(value_types_become_strings_or_missing) {
  TempDir dir;
  const auto path = dir / "types.jsonl";
  write_file(path,
             "{\"text\": \"a\", \"label\": 3}\n"
             "{\"text\": \"b\", \"label\": -2.50}\n"
             "{\"text\": \"c\", \"label\": true, \"extra\": [1, {\"label\": 9}]}\n"
             "{\"text\": \"d\", \"label\": null}\n"
             "{\"text\": \"caf\\u00e9 \\\"q\\\"\\n\"}\n"
             "{\"label\": 18446744073709551615, \"text\": false}\n");
  const auto records = read_all(path, {"text", "label"});
  BOOST_TEST_REQUIRE(records.size() == 6u);
  for (const auto& record : records) BOOST_TEST(record.error.empty(), record.error);
  BOOST_TEST(fields_of(records[0]) == (Strings{"a", "3"}), tt::per_element());
  BOOST_TEST(fields_of(records[1]) == (Strings{"b", "-2.50"}), tt::per_element());
  BOOST_TEST(fields_of(records[2]) == (Strings{"c", "true"}), tt::per_element());
  BOOST_TEST(fields_of(records[3]) == (Strings{"d", "<missing>"}), tt::per_element());
  BOOST_TEST(!records[3].fields[1].has_value());
  BOOST_TEST(fields_of(records[4]) == (Strings{"caf\xC3\xA9 \"q\"\n", "<missing>"}), tt::per_element());
  BOOST_TEST(fields_of(records[5]) == (Strings{"false", "18446744073709551615"}), tt::per_element());
}

BOOST_AUTO_TEST_CASE(nested_keys_are_not_top_level_fields) {
  TempDir dir;
  const auto path = dir / "nested.jsonl";
  write_file(path, "{\"meta\": {\"label\": \"inner\"}, \"label\": \"outer\"}\n{\"meta\": {\"label\": \"inner\"}}\n");
  const auto records = read_all(path, {"label"});
  BOOST_TEST_REQUIRE(records.size() == 2u);
  BOOST_TEST(fields_of(records[0]) == (Strings{"outer"}), tt::per_element());
  BOOST_TEST(fields_of(records[1]) == (Strings{"<missing>"}), tt::per_element());
}

BOOST_AUTO_TEST_CASE(array_object_and_non_object_lines_are_malformed) {
  TempDir dir;
  const auto path = dir / "bad.jsonl";
  write_file(path,
             "{\"text\": \"x\", \"label\": [1, 2]}\n"
             "{\"text\": {\"a\": 1}, \"label\": 1}\n"
             "[1, 2]\n"
             "\"just a string\"\n"
             "{\"text\": \"ok\", \"label\": 0}\n");
  const auto records = read_all(path, {"text", "label"});
  BOOST_TEST_REQUIRE(records.size() == 5u);
  BOOST_TEST(records[0].error == "field 'label' is an array; expected a string or number");
  BOOST_TEST(records[1].error == "field 'text' is an object; expected a string or number");
  BOOST_TEST(contains(records[2].error, "the line is an array; expected a JSON object"));
  BOOST_TEST(contains(records[3].error, "the line is a string; expected a JSON object"));
  BOOST_TEST(records[4].error.empty());
  BOOST_TEST(fields_of(records[4]) == (Strings{"ok", "0"}), tt::per_element());
}

BOOST_AUTO_TEST_CASE(malformed_line_reports_its_line_and_reading_resumes) {
  TempDir dir;
  const auto path = dir / "broken.jsonl";
  write_file(path,
             "{\"text\": \"one\", \"label\": 1}\n"
             "\n"
             "{\"text\": \"two\", \"label\": 2\n"
             "{\"text\": \"three\", \"label\": 3} trailing\n"
             "{\"text\": \"four\", \"label\": 4}\n");
  const auto records = read_all(path, {"text", "label"});
  BOOST_TEST_REQUIRE(records.size() == 4u);
  BOOST_TEST(records[0].error.empty());
  BOOST_TEST_INFO("error: " << records[1].error);
  BOOST_TEST(contains(records[1].error, "malformed JSON: parse error"));
  BOOST_TEST(!contains(records[1].error, "[json.exception"));
  BOOST_TEST(contains(records[2].error, "malformed JSON"));
  BOOST_TEST(records[3].error.empty());
  BOOST_TEST(fields_of(records[3]) == (Strings{"four", "4"}), tt::per_element());
  BOOST_TEST(lines_of(records) == (std::vector<std::int64_t>{1, 3, 4, 5}), tt::per_element());
  BOOST_TEST(rows_of(records) == (std::vector<std::int64_t>{0, 1, 2, 3}), tt::per_element());
}

BOOST_AUTO_TEST_CASE(blank_lines_bom_and_crlf) {
  TempDir dir;
  const auto path = dir / "crlf.ndjson";
  write_file(path, "\xEF\xBB\xBF{\"text\": \"a\"}\r\n\r\n   \r\n{\"text\": \"b\"}\r\n\t\n{\"text\": \"c\"}");
  const auto records = read_all(path, {"text"});
  BOOST_TEST_REQUIRE(records.size() == 3u);
  for (const auto& record : records) BOOST_TEST(record.error.empty(), record.error);
  BOOST_TEST(fields_of(records[0]) == (Strings{"a"}), tt::per_element());
  BOOST_TEST(fields_of(records[2]) == (Strings{"c"}), tt::per_element());
  BOOST_TEST(lines_of(records) == (std::vector<std::int64_t>{1, 4, 6}), tt::per_element());
  BOOST_TEST(rows_of(records) == (std::vector<std::int64_t>{0, 1, 2}), tt::per_element());
}

BOOST_AUTO_TEST_CASE(gzip_equals_plain_for_any_block_size) {
  TempDir dir;
  std::mt19937 rng(99);
  std::string content;
  Strings texts;
  for (int i = 0; i < 3000; ++i) {
    std::string text(std::uniform_int_distribution<int>(0, 300)(rng), 'a');
    for (auto& c : text) c = static_cast<char>(std::uniform_int_distribution<int>(0x20, 0x7e)(rng));
    texts.push_back(text);
    content += nlohmann::json{{"text", text}, {"label", i % 3}}.dump() + (i % 2 == 0 ? "\n" : "\r\n");
  }
  const auto plain = dir / "r.jsonl";
  const auto gzip = dir / "r.jsonl.gz";
  write_file(plain, content);
  write_gzip(gzip, content);
  for (const auto& path : {plain, gzip}) {
    for (const std::size_t block : {std::size_t{1}, std::size_t{100}, std::size_t{1} << 20}) {
      BOOST_TEST_CONTEXT("file " << path.filename() << ", block " << block) {
        TextReaderOptions options;
        options.block_bytes = block;
        TextRecordReader reader(path, TextFormat::jsonl, {"label", "text"}, options);
        TextRecord record;
        std::size_t count = 0;
        while (reader.next(record)) {
          BOOST_TEST_REQUIRE(record.error.empty(), record.error);
          BOOST_TEST_REQUIRE(fields_of(record) == (Strings{std::to_string(count % 3), texts[count]}),
                             tt::per_element());
          BOOST_TEST_REQUIRE(record.line == static_cast<std::int64_t>(count + 1));
          ++count;
        }
        BOOST_TEST(count == texts.size());
        BOOST_TEST(reader.bytes_consumed() == reader.file_size());
      }
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()
