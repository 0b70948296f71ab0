// Parse-rate measurement (disabled by default; run explicitly):
//   test_sources --run_test=parse_rate --log_level=message
// HPCTRAIN_PARSE_RATE_MB sets the size of each generated file in MB (default 100).
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <cstdlib>
#include <ctime>
#include <random>
#include <string>

#include "fixtures.hpp"
#include "hpctrain/data/text_records.hpp"

using namespace hpctrain::data;
using namespace sources_test;

namespace {

// Rows resembling a text-classification set: ~300-byte texts with commas and the odd quote to escape.
std::string generate(TextFormat format, std::size_t bytes) {
  static const char* const words[] = {"the",  "movie",  "was", "surprisingly", "good,", "bad", "and",    "\"great\"",
                                      "plot", "acting", "I",   "would",        "watch", "it",  "again.", "never"};
  std::mt19937 rng(7);
  std::string out = format == TextFormat::jsonl ? "" : "id,text,label\n";
  out.reserve(bytes + 1024);
  std::string text;
  for (std::int64_t id = 0; out.size() < bytes; ++id) {
    text.clear();
    while (text.size() < 300) {
      text += words[rng() % 16];
      text += ' ';
    }
    const std::string label = std::to_string(rng() % 5);
    if (format == TextFormat::jsonl) {
      std::string escaped;
      for (const char c : text) escaped += c == '"' ? std::string("\\\"") : std::string(1, c);
      out += "{\"id\": " + std::to_string(id) + ", \"text\": \"" + escaped + "\", \"label\": " + label + "}\n";
    } else {
      std::string quoted;
      for (const char c : text) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
      out += std::to_string(id) + ",\"" + quoted + "\"," + label + "\n";
    }
  }
  return out;
}

void measure(const std::filesystem::path& path, std::size_t plain_bytes) {
  const auto start = std::chrono::steady_clock::now();
  const std::clock_t cpu_start = std::clock();
  TextRecordReader reader(path, text_format_from_path(path), {"text", "label"});
  TextRecord record;
  std::int64_t rows = 0;
  std::size_t text_bytes = 0;
  while (reader.next(record)) {
    BOOST_TEST_REQUIRE(record.error.empty(), record.error);
    text_bytes += record.fields[0]->size();
    ++rows;
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double cpu_seconds = static_cast<double>(std::clock() - cpu_start) / CLOCKS_PER_SEC;
  BOOST_TEST(text_bytes > 0u);
  // CPU time too: on a shared machine the wall-clock rate depends on what else runs.
  const double megabytes = static_cast<double>(plain_bytes) / 1e6;
  BOOST_TEST_MESSAGE(path.filename().string()
                     << ": " << rows << " rows, " << megabytes << " MB (uncompressed): " << megabytes / seconds
                     << " MB/s wall, " << megabytes / cpu_seconds << " MB/s CPU");
}

}  // namespace

BOOST_AUTO_TEST_CASE(parse_rate, *boost::unit_test::disabled()) {
  const char* env = std::getenv("HPCTRAIN_PARSE_RATE_MB");
  const std::size_t bytes = static_cast<std::size_t>(env != nullptr ? std::atof(env) : 100.0) * 1000 * 1000;
  TempDir dir;
  for (const TextFormat format : {TextFormat::csv, TextFormat::jsonl}) {
    const std::string content = generate(format, bytes);
    const std::string name = std::string("rate.") + std::string(to_string(format));
    write_file(dir / name, content);
    write_gzip(dir / (name + ".gz"), content);
    measure(dir / name, content.size());
    measure(dir / (name + ".gz"), content.size());
  }
}
