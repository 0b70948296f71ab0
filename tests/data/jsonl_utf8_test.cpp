// JSONL with invalid UTF-8 reads as CSV does: each maximal invalid subsequence becomes U+FFFD, as Python's
// bytes.decode("utf-8", errors="replace") (checked against the reference's decoded bytes in the tokenizer goldens).
#include <fmt/format.h>
#include <boost/test/unit_test.hpp>
#include <nlohmann/json.hpp>

#include <fstream>
#include <string>

#include "data/flat_json.hpp"
#include "fixtures.hpp"
#include "hpctrain/data/text_records.hpp"
#include "text_helpers.hpp"

using namespace hpctrain::data;
using namespace sources_test;

namespace {

std::string from_hex(const std::string& hex) {
  std::string bytes;
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2)
    bytes.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  return bytes;
}

// Every golden case whose text is invalid UTF-8 (some text_hex cases are valid edge cases): {raw bytes, bytes as the
// reference decoded them}.
std::vector<std::pair<std::string, std::string>> invalid_utf8_cases() {
  std::ifstream in(std::string(HPCTRAIN_TEST_DATA_DIR) + "/tokenize/golden/cases.jsonl");
  std::vector<std::pair<std::string, std::string>> cases;
  for (std::string line; std::getline(in, line);) {
    const auto golden = nlohmann::json::parse(line);
    if (golden.contains("text_hex") && golden["variant"] == "uncased" && golden["text_hex"] != golden["replaced_hex"])
      cases.emplace_back(from_hex(golden["text_hex"]), from_hex(golden["replaced_hex"]));
  }
  return cases;
}

// A JSON string literal holding `bytes` raw (only '"', '\\' and control characters escaped).
std::string raw_json_string(const std::string& bytes) {
  std::string out = "\"";
  for (const char c : bytes) {
    if (c == '"' || c == '\\')
      out += {'\\', c};
    else if (static_cast<unsigned char>(c) < 0x20)
      out += fmt::format("\\u{:04x}", static_cast<int>(c));
    else
      out += c;
  }
  return out + "\"";
}

}  // namespace

BOOST_AUTO_TEST_SUITE(jsonl_invalid_utf8)

BOOST_AUTO_TEST_CASE(replacement_matches_the_reference_decoder) {
  const auto cases = invalid_utf8_cases();
  BOOST_TEST_REQUIRE(cases.size() >= 30u);
  for (const auto& [raw, expected] : cases) {
    std::string out;
    BOOST_TEST(hpctrain::data::detail::replace_invalid_utf8(raw, out));
    BOOST_TEST(out == expected);
  }
  std::string out;
  BOOST_TEST(!hpctrain::data::detail::replace_invalid_utf8("caf\xC3\xA9", out));
  BOOST_TEST(out == "caf\xC3\xA9");
}

BOOST_AUTO_TEST_CASE(flat_and_nested_lines_read_invalid_bytes_as_replacement_characters) {
  TempDir dir;
  const auto path = dir / "invalid.jsonl";
  const auto cases = invalid_utf8_cases();
  std::string text;
  for (const auto& golden : cases) {
    text += "{\"text\": " + raw_json_string(golden.first) + ", \"label\": \"a\"}\n";             // the flat fast path
    text += "{\"meta\": [1], \"text\": " + raw_json_string(golden.first) + ", \"label\": 1}\n";  // nlohmann's path
  }
  text += "{\"text\": \"fine\", \"label\": \"b\"}\n";
  write_file(path, text);
  const auto records = read_all(path, {"text", "label"});
  BOOST_TEST_REQUIRE(records.size() == 2 * cases.size() + 1);
  for (std::size_t i = 0; i < records.size(); ++i) {
    BOOST_TEST_INFO("record " << i);
    BOOST_TEST(records[i].error.empty(), records[i].error);
    if (i + 1 == records.size()) {
      BOOST_TEST(!records[i].replaced_invalid_utf8);
      continue;
    }
    BOOST_TEST(records[i].replaced_invalid_utf8);
    BOOST_TEST(records[i].fields[0].value_or("<missing>") == cases[i / 2].second);
  }
}

BOOST_AUTO_TEST_SUITE_END()
