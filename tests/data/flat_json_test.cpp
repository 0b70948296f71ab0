// Differential test of Note [Flat JSON fast path]: whenever the fast path accepts a line, nlohmann must accept it
// too and extract the same fields; and the fast path must accept the ordinary flat lines it exists for.
#include <boost/test/unit_test.hpp>
#include <nlohmann/json.hpp>

#include <random>
#include <string>
#include <vector>

#include "data/flat_json.hpp"
#include "data/jsonl_parser.hpp"
#include "text_helpers.hpp"

using namespace hpctrain::data;
using namespace sources_test;

namespace {

const Strings kNames = {"text", "label", "x"};

std::string show(const std::vector<std::optional<std::string>>& fields) {
  std::string out;
  for (const auto& field : fields) out += field ? "'" + *field + "' " : "<missing> ";
  return out;
}

// Checks the implication for one line; returns whether the fast path accepted it.
bool agrees_with_nlohmann(const std::string& line) {
  std::vector<std::optional<std::string>> fast_fields;
  const bool fast = detail::parse_flat_object(line, kNames, fast_fields);
  TextRecord reference;
  detail::extract_with_nlohmann(line, kNames, reference);
  if (fast) {
    BOOST_TEST_INFO("line: " << line << "\nnlohmann error: " << reference.error << "\nfast: " << show(fast_fields)
                             << "\nnlohmann: " << show(reference.fields));
    BOOST_TEST_REQUIRE((reference.error.empty() && fast_fields == reference.fields));
  }
  return fast;
}

std::string random_string(std::mt19937& rng) {
  // Code points from every UTF-8 length class, control characters and JSON's special characters.
  static const std::vector<std::uint32_t> pool = {'a',    'Z',    ' ',    '"',     '\\',    '/',     '\n',
                                                  '\t',   0x01,   0x1f,   0x7f,    0xe9,    0x7ff,   0x800,
                                                  0x6f22, 0xfffd, 0xffff, 0x10000, 0x1f600, 0x10ffff};
  nlohmann::json::string_t text;
  const int length = std::uniform_int_distribution<int>(0, 12)(rng);
  for (int i = 0; i < length; ++i) {
    const std::uint32_t cp = pool[std::uniform_int_distribution<std::size_t>(0, pool.size() - 1)(rng)];
    if (cp < 0x80) {
      text.push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
      text += {static_cast<char>(0xC0 | (cp >> 6)), static_cast<char>(0x80 | (cp & 0x3F))};
    } else if (cp < 0x10000) {
      text += {static_cast<char>(0xE0 | (cp >> 12)), static_cast<char>(0x80 | ((cp >> 6) & 0x3F)),
               static_cast<char>(0x80 | (cp & 0x3F))};
    } else {
      text += {static_cast<char>(0xF0 | (cp >> 18)), static_cast<char>(0x80 | ((cp >> 12) & 0x3F)),
               static_cast<char>(0x80 | ((cp >> 6) & 0x3F)), static_cast<char>(0x80 | (cp & 0x3F))};
    }
  }
  return text;
}

nlohmann::json random_value(std::mt19937& rng) {
  switch (std::uniform_int_distribution<int>(0, 6)(rng)) {
    case 0: return random_string(rng);
    case 1: return static_cast<std::int64_t>(rng()) - (std::int64_t{1} << 31);
    case 2: return std::uniform_real_distribution<double>(-1e6, 1e6)(rng);
    case 3:
      return std::ldexp(std::uniform_real_distribution<double>(0.5, 1)(rng),
                        std::uniform_int_distribution<int>(-300, 300)(rng));
    case 4: return rng() % 2 == 0;
    case 5: return nullptr;
    default: return std::numeric_limits<std::uint64_t>::max() - rng() % 10;
  }
}

std::string random_flat_line(std::mt19937& rng) {
  nlohmann::json object = nlohmann::json::object();
  static const Strings keys = {"text", "label", "x", "other", "t\u00e9xt", ""};
  const int members = std::uniform_int_distribution<int>(0, 5)(rng);
  for (int i = 0; i < members; ++i) object[keys[rng() % keys.size()]] = random_value(rng);
  const bool ensure_ascii = rng() % 2 == 0;
  return object.dump(rng() % 3 == 0 ? 1 : -1, ' ', ensure_ascii);
}

std::string mutate(std::string line, std::mt19937& rng) {
  static const std::string interesting = "{}[]\",:\\u0-.eE+ \t\r\nntf\x01\x80\xbf\xc0\xc3\xe0\xed\xf0\xf4\xf5\xff";
  const int edits = std::uniform_int_distribution<int>(1, 3)(rng);
  for (int i = 0; i < edits; ++i) {
    const std::size_t at = line.empty() ? 0 : rng() % (line.size() + 1);
    const char c = interesting[rng() % interesting.size()];
    switch (rng() % 3) {
      case 0: line.insert(line.begin() + static_cast<std::ptrdiff_t>(at), c); break;
      case 1:
        if (at < line.size()) line.erase(at, 1);
        break;
      default:
        if (at < line.size()) line[at] = c;
        break;
    }
  }
  return line;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(flat_json)

BOOST_AUTO_TEST_CASE(edge_cases_agree_and_common_ones_take_the_fast_path) {
  const Strings fast_expected = {
      R"({})",
      R"(  { "text" : "a" , "label" : -0 }  )",
      R"({"label": -0.0, "text": 1E+05, "x": 1.5e-10})",
      R"({"label": 123456789012345678901234})",
      R"({"text": "caf\u00e9 \ud83d\ude00 \u0000 \/ \b\f\n\r\t \" \\"})",
      "{\"text\": \"\xc3\xa9\xe6\xbc\xa2\xf0\x9f\x98\x80\xf4\x8f\xbf\xbf\"}",
      R"({"te\u0078t": "escaped key", "label": null})",
      R"({"text": "first", "text": "second", "label": "x", "label": null})",
      R"({"label": true, "text": false, "x": null})",
      "{\"other\": \"skipped\", \"text\": \"kept\"}\r",
  };
  for (const auto& line : fast_expected) {
    BOOST_TEST_INFO("line: " << line);
    BOOST_TEST(agrees_with_nlohmann(line));
  }
  const Strings slow_or_invalid = {
      R"({"meta": {"text": "nested"}, "text": "top"})",
      R"({"text": [1]})",
      R"([1, 2])",
      R"("text")",
      R"(3)",
      R"({"label": 1e999})",
      R"({"label": 1e100})",
      R"({"label": 01})",
      R"({"label": -})",
      R"({"label": 1.})",
      R"({"label": .5})",
      R"({"label": +1})",
      R"({"text": "\udc00"})",
      R"({"text": "\ud800"})",
      R"({"text": "\ud800\u0041"})",
      R"({"text": "\u12"})",
      R"({"text": "\x41"})",
      "{\"text\": \"a\x01\"}",
      "{\"text\": \"a\tb\"}",
      "{\"text\": \"\xc0\x80\"}",
      "{\"text\": \"\xe0\x80\x80\"}",
      "{\"text\": \"\xed\xa0\x80\"}",
      "{\"text\": \"\xf4\x90\x80\x80\"}",
      "{\"text\": \"\xf5\x80\x80\x80\"}",
      "{\"text\": \"\x80\"}",
      "{\"text\": \"\xe6\xbc\"}",
      R"({} x)",
      R"({}{})",
      R"({"a":1,})",
      R"({,})",
      R"({"a" 1})",
      R"({"a":tru})",
      R"({"a":nul})",
      R"({"a":1)",
      R"({"a)",
      "\xEF\xBB\xBF{\"text\": \"bom\"}",
      R"({'text': 'single'})",
  };
  for (const auto& line : slow_or_invalid) {
    BOOST_TEST_INFO("line: " << line);
    BOOST_TEST(!agrees_with_nlohmann(line));
  }
}

BOOST_AUTO_TEST_CASE(random_valid_lines_take_the_fast_path_and_agree) {
  std::mt19937 rng(2024);
  for (int i = 0; i < 5000; ++i) {
    const std::string line = random_flat_line(rng);
    BOOST_TEST_INFO("line: " << line);
    BOOST_TEST_REQUIRE(agrees_with_nlohmann(line));
  }
}

BOOST_AUTO_TEST_CASE(mutated_lines_never_disagree) {
  std::mt19937 rng(77);
  int accepted = 0;
  const int cases = 30000;
  for (int i = 0; i < cases; ++i) accepted += agrees_with_nlohmann(mutate(random_flat_line(rng), rng));
  // Both outcomes must be exercised for the implication to mean something.
  BOOST_TEST(accepted > cases / 20);
  BOOST_TEST(accepted < cases - cases / 20);
  BOOST_TEST_MESSAGE("fast path accepted " << accepted << " of " << cases << " mutated lines");
}

BOOST_AUTO_TEST_SUITE_END()
