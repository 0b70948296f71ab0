// Every golden case from Hugging Face tokenizers must give identical input_ids and token_type_ids.
#include "golden_cases.hpp"

#include <boost/test/unit_test.hpp>
#include <fmt/format.h>

using namespace hpctrain::tokenize;
using namespace hpctrain::tokenize::testing;

namespace {

// Checks cases of one variant; reports the number of mismatches and the first one in full.
void check_cases(const BertTokenizer& tokenizer, const std::vector<GoldenCase>& cases, const std::string& variant,
                 const std::string& label) {
  size_t checked = 0, mismatches = 0;
  std::string first_mismatch;
  Encoding encoding;
  for (const GoldenCase& c : cases) {
    if (c.variant != variant) continue;
    ++checked;
    tokenizer.encode_into(c.text, c.text_pair, c.max_length, encoding);
    if (encoding.input_ids == c.input_ids && encoding.token_type_ids == c.token_type_ids) continue;
    if (mismatches++ == 0) {
      first_mismatch = fmt::format(
          "cases.jsonl line {}: text \"{}\"{} max_length {}\n  expected {}\n  got      {}\n  type ids match: {}", c.line,
          escaped(c.text), c.text_pair ? " pair \"" + escaped(*c.text_pair) + "\"" : "", c.max_length,
          describe_ids(tokenizer, c.input_ids), describe_ids(tokenizer, encoding.input_ids),
          encoding.token_type_ids == c.token_type_ids);
    }
  }
  BOOST_TEST_MESSAGE(fmt::format("{}: {} golden cases", label, checked));
  BOOST_TEST(checked > 0, "no golden cases for variant " << variant);
  BOOST_TEST(mismatches == 0, label << ": " << mismatches << " of " << checked << " cases differ; first:\n"
                                    << first_mismatch);
}

const std::vector<GoldenCase>& cases() {
  static const std::vector<GoldenCase> all = load_golden_cases();
  return all;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(golden)

BOOST_AUTO_TEST_CASE(corpus_is_complete) {
  BOOST_TEST(cases().size() > 4000u);
  size_t pairs = 0, truncated = 0, invalid = 0;
  for (const auto& c : cases()) {
    pairs += c.text_pair.has_value();
    truncated += c.max_length < 100;
    invalid += c.replaced.has_value();
  }
  BOOST_TEST(pairs > 500u);
  BOOST_TEST(truncated > 500u);
  BOOST_TEST(invalid > 30u);
}

BOOST_AUTO_TEST_CASE(bert_variants_match_hugging_face) {
  for (const auto& [name, tokenizer] : bert_variants()) check_cases(tokenizer, cases(), name, name);
}

// The tiny folder holds tokenizer.json (saved by the reference), vocab.txt and tokenizer_config.json; each way of
// loading it must reproduce the reference.
BOOST_AUTO_TEST_CASE(tiny_tokenizer_every_loading_path) {
  const auto tiny = kGoldenDir / "tiny";
  const std::vector<std::pair<std::string, std::vector<std::string>>> layouts = {
      {"tokenizer.json only", {"tokenizer.json"}},
      {"vocab.txt + tokenizer_config.json", {"vocab.txt", "tokenizer_config.json"}},
      {"all three", {"tokenizer.json", "vocab.txt", "tokenizer_config.json"}}};
  for (const auto& [label, files] : layouts) {
    TempDir dir;
    for (const auto& file : files) std::filesystem::copy_file(tiny / file, dir.path() / file);
    check_cases(BertTokenizer::from_pretrained(dir.path()), cases(), "tiny", "tiny (" + label + ")");
  }
}

// Encoding::truncated says whether max_length dropped tokens; a truncated single sequence is a prefix of the full one.
BOOST_AUTO_TEST_CASE(truncated_flag_matches_dropped_tokens) {
  const auto variants = bert_variants();
  const BertTokenizer& tokenizer = variants.at("uncased");
  size_t checked = 0;
  for (const auto& c : cases()) {
    if (c.variant != "uncased" || c.max_length >= 100) continue;
    const Encoding cut = c.text_pair ? tokenizer.encode_pair(c.text, *c.text_pair, c.max_length)
                                     : tokenizer.encode(c.text, c.max_length);
    const Encoding full = c.text_pair ? tokenizer.encode_pair(c.text, *c.text_pair, BertTokenizer::kNoTruncation)
                                      : tokenizer.encode(c.text, BertTokenizer::kNoTruncation);
    BOOST_TEST(cut.truncated == (full.input_ids.size() > size_t(c.max_length)), "line " << c.line);
    BOOST_TEST(!full.truncated);
    if (!c.text_pair) {
      BOOST_TEST(std::equal(cut.input_ids.begin(), cut.input_ids.end() - 1, full.input_ids.begin()), "line " << c.line);
    }
    ++checked;
  }
  BOOST_TEST(checked > 100u);
}

BOOST_AUTO_TEST_SUITE_END()
