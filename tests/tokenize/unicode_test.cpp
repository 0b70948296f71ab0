// Every Unicode scalar value through every BertNormalizer configuration and the pre-tokenizer, compared block by
// block with hashes of what Hugging Face tokenizers produced (golden/unicode_sweep.json).
#include "golden_cases.hpp"
#include "hpctrain/core/sha256.hpp"
#include "hpctrain/tokenize/normalizer.hpp"
#include "hpctrain/tokenize/pre_tokenizer.hpp"
#include "hpctrain/tokenize/utf8.hpp"

#include <boost/test/unit_test.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <functional>

using namespace hpctrain::tokenize;
using namespace hpctrain::tokenize::testing;

namespace {

const nlohmann::json& sweep() {
  static const nlohmann::json root = [] {
    std::ifstream in(kGoldenDir / "unicode_sweep.json");
    return nlohmann::json::parse(in);
  }();
  return root;
}

bool is_surrogate(char32_t cp) { return cp >= 0xD800 && cp <= 0xDFFF; }

// Compares per-block hashes of output(cp) + '\0'; returns the first differing block's description.
std::string first_differing_block(const nlohmann::json& expected, const std::function<std::string(char32_t)>& output) {
  const char32_t block_size = sweep().at("block_size").get<char32_t>();
  for (size_t block = 0; block < expected.size(); ++block) {
    hpctrain::Sha256 hasher;
    for (char32_t cp = char32_t(block) * block_size; cp < char32_t(block + 1) * block_size; ++cp) {
      if (is_surrogate(cp)) continue;
      hasher.update(output(cp));
      hasher.update(std::string_view("", 1));
    }
    if (hasher.hex_digest().substr(0, 16) != expected[block].get<std::string>()) {
      return fmt::format("U+{:04X}..U+{:04X}", block * block_size, (block + 1) * block_size - 1);
    }
  }
  return "";
}

std::string encoded(char32_t cp) {
  std::string s;
  utf8::append(s, cp);
  return s;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(unicode)

BOOST_AUTO_TEST_CASE(every_code_point_through_every_normalizer) {
  const auto& normalizers = sweep().at("normalizers");
  BOOST_TEST(normalizers.size() == 16u);
  for (const auto& [name, entry] : normalizers.items()) {
    const auto& o = entry.at("options");
    const BertNormalizer normalizer({o.at("cleanText").get<bool>(), o.at("handleChineseChars").get<bool>(),
                                     o.at("stripAccents").get<bool>(), o.at("lowercase").get<bool>()});
    std::string out;
    const std::string block = first_differing_block(entry.at("blocks"), [&](char32_t cp) {
      normalizer.normalize(encoded(cp), out);
      return out;
    });
    BOOST_TEST(block.empty(), "normalizer " << name << " differs from Hugging Face in block " << block);
  }
}

BOOST_AUTO_TEST_CASE(every_code_point_through_the_pre_tokenizer) {
  std::vector<std::string_view> words;
  const std::string block = first_differing_block(sweep().at("pre_tokenizer"), [&](char32_t cp) {
    const std::string text = "a" + encoded(cp) + "a";
    words.clear();
    BertPreTokenizer::split(text, words);
    return std::string(words.size() == 1 ? "keep" : words.size() == 2 ? "space" : "punct");
  });
  BOOST_TEST(block.empty(), "pre-tokenizer differs from Hugging Face in block " << block);
}

// Whole strings (mark orderings across characters, CJK padding next to accents, ...) through the normalizer.
BOOST_AUTO_TEST_CASE(normalizer_output_matches_reference) {
  std::ifstream in(kGoldenDir / "normalizer_cases.jsonl");
  size_t checked = 0, line_number = 0;
  std::string line, out;
  while (std::getline(in, line)) {
    ++line_number;
    const auto c = nlohmann::json::parse(line);
    const auto& o = c.at("options");
    const BertNormalizer normalizer({o.at("cleanText").get<bool>(), o.at("handleChineseChars").get<bool>(),
                                     o.at("stripAccents").get<bool>(), o.at("lowercase").get<bool>()});
    normalizer.normalize(c.at("text").get<std::string>(), out);
    BOOST_TEST(escaped(out) == escaped(c.at("normalized").get<std::string>()),
               "normalizer_cases.jsonl line " << line_number << " options " << o.dump());
    ++checked;
  }
  BOOST_TEST(checked > 1000u);
}

BOOST_AUTO_TEST_SUITE_END()
