// Invalid UTF-8 never crashes: each maximal invalid subsequence reads as U+FFFD (as Python's errors="replace").
#include "golden_cases.hpp"
#include "hpctrain/tokenize/utf8.hpp"

#include <boost/test/unit_test.hpp>

#include <random>

using namespace hpctrain::tokenize;
using namespace hpctrain::tokenize::testing;

BOOST_AUTO_TEST_SUITE(invalid_utf8)

// The goldens' text_hex cases (overlongs, encoded surrogates, truncated sequences, lone continuation bytes, 0xFF,
// above U+10FFFF) carry the reference decoder's output.
BOOST_AUTO_TEST_CASE(replacement_matches_reference_decoder) {
  size_t checked = 0;
  for (const GoldenCase& c : load_golden_cases()) {
    if (!c.replaced) continue;
    std::string text = c.text;
    const bool replaced = replace_invalid_utf8(text);
    BOOST_TEST(text == *c.replaced, "line " << c.line << ": \"" << escaped(c.text) << "\" became \""
                                            << escaped(text) << "\", expected \"" << escaped(*c.replaced) << "\"");
    BOOST_TEST(replaced == (c.text != *c.replaced), "line " << c.line);
    BOOST_TEST(utf8::is_valid(c.text) == !replaced, "line " << c.line);
    ++checked;
  }
  BOOST_TEST(checked > 30u);
}

// Unicode 15.0, section 3.9, table 3-8 (U+FFFD for maximal subparts).
BOOST_AUTO_TEST_CASE(standard_example_table_3_8) {
  std::string text = "\x61\xF1\x80\x80\xE1\x80\xC2\x62\x80\x63\x80\xBF\x64";
  BOOST_TEST(replace_invalid_utf8(text));
  const std::string r = "\xEF\xBF\xBD";
  BOOST_TEST(escaped(text) == escaped("a" + r + r + r + "b" + r + "c" + r + r + "d"));
  BOOST_TEST(!replace_invalid_utf8(text));  // now valid: nothing more to replace
}

// Random bytes: replacement yields valid UTF-8, leaves valid input alone, and encode() of the raw bytes equals
// encode() of the repaired text.
BOOST_AUTO_TEST_CASE(random_bytes_never_crash) {
  const auto variants = bert_variants();
  std::mt19937 random(42);
  std::uniform_int_distribution<int> byte(0, 255), length(0, 64);
  for (int round = 0; round < 3000; ++round) {
    std::string raw(size_t(length(random)), '\0');
    for (char& c : raw) c = char(random() % 4 == 0 ? 'a' + byte(random) % 26 : byte(random));
    std::string repaired = raw;
    replace_invalid_utf8(repaired);
    BOOST_REQUIRE(utf8::is_valid(repaired));
    std::string again = repaired;
    BOOST_REQUIRE(!replace_invalid_utf8(again));
    for (const auto& [name, tokenizer] : variants) {
      BOOST_REQUIRE_MESSAGE(tokenizer.encode(raw, 64).input_ids == tokenizer.encode(repaired, 64).input_ids,
                            name << ": \"" << escaped(raw) << "\"");
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()
