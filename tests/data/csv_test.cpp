// CSV/TSV reading: RFC 4180 quoting, line endings, BOM, header binding, malformed rows and resync, gzip, buffering.
#include <boost/test/unit_test.hpp>

#include <random>
#include <string>
#include <vector>

#include "fixtures.hpp"
#include "hpctrain/core/error.hpp"
#include "hpctrain/data/text_records.hpp"
#include "text_helpers.hpp"

using namespace hpctrain::data;
using namespace sources_test;

BOOST_AUTO_TEST_SUITE(csv)

BOOST_AUTO_TEST_CASE(quotes_and_doubled_quote_escapes) {
  TempDir dir;
  const auto path = dir / "q.csv";
  write_file(path, "id,text,label\n1,\"hello, \"\"world\"\"\",pos\n2,\"\",neg\n3,plain,\"x\"\n");
  const auto records = read_all(path, {"text", "label"});
  BOOST_TEST_REQUIRE(records.size() == 3u);
  BOOST_TEST(fields_of(records[0]) == (Strings{"hello, \"world\"", "pos"}), tt::per_element());
  BOOST_TEST(fields_of(records[1]) == (Strings{"", "neg"}), tt::per_element());
  BOOST_TEST(fields_of(records[2]) == (Strings{"plain", "x"}), tt::per_element());
  for (const auto& record : records) BOOST_TEST(record.error.empty());
}

BOOST_AUTO_TEST_CASE(embedded_newlines_keep_row_and_line_numbers) {
  TempDir dir;
  const auto path = dir / "nl.csv";
  // Record 0 spans lines 2-3 (LF inside quotes), record 1 spans lines 4-6 (CRLF inside quotes), record 2 is line 7.
  write_file(path, "text,label\n\"first\nsecond\",a\n\"x\r\ny\r\nz\",b\nlast,c\n");
  const auto records = read_all(path, {"text", "label"});
  BOOST_TEST_REQUIRE(records.size() == 3u);
  BOOST_TEST(fields_of(records[0]) == (Strings{"first\nsecond", "a"}), tt::per_element());
  BOOST_TEST(fields_of(records[1]) == (Strings{"x\r\ny\r\nz", "b"}), tt::per_element());
  BOOST_TEST(fields_of(records[2]) == (Strings{"last", "c"}), tt::per_element());
  BOOST_TEST(rows_of(records) == (std::vector<std::int64_t>{0, 1, 2}), tt::per_element());
  BOOST_TEST(lines_of(records) == (std::vector<std::int64_t>{2, 4, 7}), tt::per_element());
}

BOOST_AUTO_TEST_CASE(utf8_bom_is_stripped_from_the_header) {
  TempDir dir;
  const auto path = dir / "bom.csv";
  write_file(path, "\xEF\xBB\xBFid,text\n7,caf\xC3\xA9\n");
  TextRecordReader reader(path, TextFormat::csv, {"id", "text"});
  BOOST_TEST(reader.columns() == (Strings{"id", "text"}), tt::per_element());
  TextRecord record;
  BOOST_TEST_REQUIRE(reader.next(record));
  BOOST_TEST(fields_of(record) == (Strings{"7", "caf\xC3\xA9"}), tt::per_element());
  BOOST_TEST(record.line == 1 + 1);
}

BOOST_AUTO_TEST_CASE(crlf_line_endings_and_missing_final_newline) {
  TempDir dir;
  const auto path = dir / "crlf.csv";
  write_file(path, "text,label\r\nalpha,1\r\n\"be\"\"ta\",2\r\ngamma,3");
  const auto records = read_all(path, {"label", "text"});
  BOOST_TEST_REQUIRE(records.size() == 3u);
  BOOST_TEST(fields_of(records[0]) == (Strings{"1", "alpha"}), tt::per_element());
  BOOST_TEST(fields_of(records[1]) == (Strings{"2", "be\"ta"}), tt::per_element());
  BOOST_TEST(fields_of(records[2]) == (Strings{"3", "gamma"}), tt::per_element());
  BOOST_TEST(lines_of(records) == (std::vector<std::int64_t>{2, 3, 4}), tt::per_element());
}

BOOST_AUTO_TEST_CASE(empty_last_field_and_empty_fields) {
  TempDir dir;
  const auto path = dir / "empty.csv";
  write_file(path, "a,b,c\n,,\nx,,\n1,2,");
  const auto records = read_all(path, {"a", "b", "c"});
  BOOST_TEST_REQUIRE(records.size() == 3u);
  BOOST_TEST(fields_of(records[0]) == (Strings{"", "", ""}), tt::per_element());
  BOOST_TEST(fields_of(records[1]) == (Strings{"x", "", ""}), tt::per_element());
  BOOST_TEST(fields_of(records[2]) == (Strings{"1", "2", ""}), tt::per_element());
  for (const auto& record : records) BOOST_TEST(record.error.empty());
}

BOOST_AUTO_TEST_CASE(tsv_uses_tabs_with_csv_quoting) {
  TempDir dir;
  const auto path = dir / "data.tsv";
  write_file(path, "sentence\tlabel\nit's, fine\t1\n\"tab\tinside \"\"quoted\"\"\"\t0\n");
  BOOST_TEST((text_format_from_path(path) == TextFormat::tsv));
  const auto records = read_all(path, {"sentence", "label"});
  BOOST_TEST_REQUIRE(records.size() == 2u);
  BOOST_TEST(fields_of(records[0]) == (Strings{"it's, fine", "1"}), tt::per_element());
  BOOST_TEST(fields_of(records[1]) == (Strings{"tab\tinside \"quoted\"", "0"}), tt::per_element());
}

BOOST_AUTO_TEST_CASE(missing_header_column_lists_the_available_ones) {
  TempDir dir;
  const auto path = dir / "cols.csv";
  write_file(path, "id,sentence\n1,hi\n");
  const std::string message = error_of([&] { TextRecordReader reader(path, TextFormat::csv, {"sentence", "label"}); });
  BOOST_TEST_INFO("message: " << message);
  BOOST_TEST(contains(message, "no column 'label'"));
  BOOST_TEST(contains(message, "[id, sentence]"));
  BOOST_TEST(contains(message, path.string()));
}

BOOST_AUTO_TEST_CASE(empty_file_and_duplicate_requests_are_errors) {
  TempDir dir;
  const auto empty = dir / "empty.csv";
  write_file(empty, "\n\n");
  std::string message = error_of([&] { TextRecordReader reader(empty, TextFormat::csv, {"text"}); });
  BOOST_TEST_INFO("message: " << message);
  BOOST_TEST(contains(message, "is empty"));

  const auto path = dir / "dup.csv";
  write_file(path, "text,text,label\na,b,c\n");
  message = error_of([&] { TextRecordReader reader(path, TextFormat::csv, {"text"}); });
  BOOST_TEST_INFO("message: " << message);
  BOOST_TEST(contains(message, "more than once"));
  message = error_of([&] { TextRecordReader reader(path, TextFormat::csv, {"label", "label"}); });
  BOOST_TEST(contains(message, "requested twice"));
}

BOOST_AUTO_TEST_CASE(wrong_column_count_is_malformed_and_reading_continues) {
  TempDir dir;
  const auto path = dir / "count.csv";
  write_file(path, "a,b,c\n1,2,3\n4,5\n6,7,8,9\n10,11,12\n");
  const auto records = read_all(path, {"c"});
  BOOST_TEST_REQUIRE(records.size() == 4u);
  BOOST_TEST(records[0].error.empty());
  BOOST_TEST(records[1].error == "expected 3 columns (as in the header), got 2");
  BOOST_TEST(records[1].line == 3);
  BOOST_TEST(contains(records[2].error, "got 4"));
  BOOST_TEST(records[3].error.empty());
  BOOST_TEST(fields_of(records[3]) == (Strings{"12"}), tt::per_element());
  BOOST_TEST(rows_of(records) == (std::vector<std::int64_t>{0, 1, 2, 3}), tt::per_element());
}

BOOST_AUTO_TEST_CASE(unterminated_quote_reports_the_line_where_it_opened) {
  TempDir dir;
  const auto path = dir / "open.csv";
  write_file(path, "text,label\nok,1\nfine,\"never\nclosed\nat all\n");
  const auto records = read_all(path, {"text", "label"});
  BOOST_TEST_REQUIRE(records.size() == 2u);
  BOOST_TEST(records[0].error.empty());
  BOOST_TEST(records[1].line == 3);
  BOOST_TEST_INFO("error: " << records[1].error);
  BOOST_TEST(contains(records[1].error, "unterminated quoted field"));
  BOOST_TEST(contains(records[1].error, "column 2 ('label') on line 3"));
}

BOOST_AUTO_TEST_CASE(stray_quote_and_text_after_quote_resync_at_the_next_line) {
  TempDir dir;
  const auto path = dir / "stray.csv";
  write_file(path, "text,label\nab\"c,1\ngood,2\n\"x\"y,3\nalso good,4\n");
  const auto records = read_all(path, {"text", "label"});
  BOOST_TEST_REQUIRE(records.size() == 4u);
  BOOST_TEST_INFO("error: " << records[0].error);
  BOOST_TEST(contains(records[0].error, "stray '\"'"));
  BOOST_TEST(fields_of(records[1]) == (Strings{"good", "2"}), tt::per_element());
  BOOST_TEST_INFO("error: " << records[2].error);
  BOOST_TEST(contains(records[2].error, "unexpected 'y' after the closing quote"));
  BOOST_TEST(fields_of(records[3]) == (Strings{"also good", "4"}), tt::per_element());
  BOOST_TEST(lines_of(records) == (std::vector<std::int64_t>{2, 3, 4, 5}), tt::per_element());
}

BOOST_AUTO_TEST_CASE(oversized_record_is_malformed_instead_of_buffering_the_file) {
  TempDir dir;
  const auto path = dir / "big.csv";
  std::string content = "text,label\n\"opens and never closes,1\n";
  for (int i = 0; i < 200; ++i) content += "filler line " + std::to_string(i) + ",0\n";
  write_file(path, content);
  TextReaderOptions options;
  options.block_bytes = 64;
  options.max_record_bytes = 1024;
  const auto records = read_all(path, {"text", "label"}, options);
  BOOST_TEST_REQUIRE(records.size() == 201u);
  BOOST_TEST(contains(records[0].error, "longer than 1024 bytes"));
  BOOST_TEST(fields_of(records[1]) == (Strings{"filler line 0", "0"}), tt::per_element());
  BOOST_TEST(records[1].line == 3);
}

BOOST_AUTO_TEST_CASE(blank_lines_are_skipped_but_counted_as_lines) {
  TempDir dir;
  const auto path = dir / "blank.csv";
  write_file(path, "\ntext,label\n\na,1\n\r\n\nb,2\n\n");
  const auto records = read_all(path, {"text"});
  BOOST_TEST_REQUIRE(records.size() == 2u);
  BOOST_TEST(rows_of(records) == (std::vector<std::int64_t>{0, 1}), tt::per_element());
  BOOST_TEST(lines_of(records) == (std::vector<std::int64_t>{4, 7}), tt::per_element());
}

// Random records (delimiters, quotes, LF/CRLF inside fields, empty fields, multi-byte UTF-8) written with
// RFC 4180 quoting must come back unchanged with any buffer size, plain or gzip.
BOOST_AUTO_TEST_CASE(random_records_round_trip_across_block_boundaries) {
  TempDir dir;
  std::mt19937 rng(1234);
  for (const char delimiter : {',', '\t'}) {
    const auto generated = generate_delimited(rng, delimiter, 600);
    const std::string ext = delimiter == ',' ? ".csv" : ".tsv";
    const auto plain = dir / ("random" + ext);
    const auto gzip = dir / ("random" + ext + ".gz");
    write_file(plain, generated.content);
    write_gzip(gzip, generated.content);
    for (const auto& path : {plain, gzip}) {
      for (const std::size_t block : {std::size_t{1}, std::size_t{17}, std::size_t{4096}, std::size_t{1} << 20}) {
        BOOST_TEST_CONTEXT("file " << path.filename() << ", block " << block) {
          TextReaderOptions options;
          options.block_bytes = block;
          const auto records = read_all(path, {"label", "text"}, options);
          BOOST_TEST_REQUIRE(records.size() == generated.records.size());
          for (std::size_t i = 0; i < records.size(); ++i) {
            BOOST_TEST_REQUIRE(records[i].error.empty(), "row " << i << ": " << records[i].error);
            BOOST_TEST_REQUIRE(fields_of(records[i]) == generated.records[i].fields, tt::per_element());
            BOOST_TEST_REQUIRE(records[i].line == generated.records[i].line);
            BOOST_TEST_REQUIRE(records[i].row == static_cast<std::int64_t>(i));
          }
        }
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(gzip_gives_the_same_records_and_bytes_consumed_reaches_file_size) {
  TempDir dir;
  std::string content = "text,label\n";
  for (int i = 0; i < 20000; ++i)
    content += "\"row " + std::to_string(i) + ", quoted\"," + std::to_string(i % 7) + "\n";
  const auto plain = dir / "p.csv";
  const auto gzip = dir / "p.csv.gz";
  write_file(plain, content);
  write_gzip(gzip, content);
  for (const auto& path : {plain, gzip}) {
    TextReaderOptions options;
    options.block_bytes = 4096;
    TextRecordReader reader(path, text_format_from_path(path), {"text", "label"}, options);
    BOOST_TEST(reader.file_size() == std::filesystem::file_size(path));
    BOOST_TEST(reader.bytes_consumed() < reader.file_size());
    TextRecord record;
    std::int64_t count = 0;
    while (reader.next(record)) {
      BOOST_TEST_REQUIRE(record.error.empty());
      BOOST_TEST_REQUIRE(*record.fields[0] == "row " + std::to_string(count) + ", quoted");
      ++count;
    }
    BOOST_TEST(count == 20000);
    BOOST_TEST(reader.bytes_consumed() == reader.file_size());
  }
}

BOOST_AUTO_TEST_CASE(format_from_path) {
  BOOST_TEST((text_format_from_path("a/train.csv") == TextFormat::csv));
  BOOST_TEST((text_format_from_path("train.CSV.gz") == TextFormat::csv));
  BOOST_TEST((text_format_from_path("dev.tsv.gz") == TextFormat::tsv));
  BOOST_TEST((text_format_from_path("x.jsonl") == TextFormat::jsonl));
  BOOST_TEST((text_format_from_path("x.ndjson.gz") == TextFormat::jsonl));
  const std::string message = error_of([] { (void)text_format_from_path("data/train.txt.gz"); });
  BOOST_TEST_INFO("message: " << message);
  BOOST_TEST(contains(message, "train.txt.gz"));
  BOOST_TEST(contains(message, ".csv, .tsv, .jsonl or .ndjson"));
}

BOOST_AUTO_TEST_SUITE_END()
