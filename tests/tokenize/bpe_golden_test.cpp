// Byte-level BPE against Hugging Face: every text of golden/bpe/cases.json (written by
// golden/bpe/generate_bpe_goldens.py) must give AutoTokenizer's input_ids and decode back to its decode.
#include "golden_cases.hpp"
#include "hpctrain/tokenize/byte_level_bpe.hpp"
#include "tokenize/byte_level.hpp"
#include "tokenize/regex_split.hpp"

#include <boost/test/unit_test.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <fstream>

using namespace hpctrain::tokenize;
using namespace hpctrain::tokenize::testing;

namespace {

const std::filesystem::path kBpeDir = kGoldenDir / "bpe";

struct BpeCase {
  std::string style, text, decoded;
  std::vector<int32_t> input_ids;
  std::vector<std::string> pieces;  // the pre-tokenizer's output alone (byte-level characters)
};

const std::vector<BpeCase>& bpe_cases() {
  static const std::vector<BpeCase> cases = [] {
    std::ifstream in(kBpeDir / "cases.json");
    const nlohmann::json root = nlohmann::json::parse(in);
    std::vector<BpeCase> out;
    for (const auto& c : root.at("cases")) {
      out.push_back({c.at("style"), c.at("text"), c.at("decoded"), c.at("input_ids").get<std::vector<int32_t>>(),
                     c.at("pieces").get<std::vector<std::string>>()});
    }
    return out;
  }();
  return cases;
}

// Checks every case of style; reports the number of mismatches and the first one in full.
void check_style(const std::string& style, size_t minimum_cases) {
  const auto tokenizer = ByteLevelBpeTokenizer::from_pretrained(kBpeDir / style);
  size_t checked = 0, id_mismatches = 0, decode_mismatches = 0;
  std::string first;
  for (const BpeCase& c : bpe_cases()) {
    if (c.style != style) continue;
    ++checked;
    const std::vector<int32_t> ids = tokenizer.encode(c.text);
    const std::string decoded = tokenizer.decode(c.input_ids);
    id_mismatches += ids != c.input_ids;
    decode_mismatches += decoded != c.decoded;
    if (first.empty() && (ids != c.input_ids || decoded != c.decoded)) {
      first = fmt::format("text \"{}\"\n  expected {}\n  got      {}\n  decode expected \"{}\"\n  decode got      \"{}\"",
                          escaped(c.text), c.input_ids, ids, escaped(c.decoded), escaped(decoded));
    }
  }
  BOOST_TEST_MESSAGE(fmt::format("{}: {} golden texts", style, checked));
  BOOST_TEST(checked >= minimum_cases);
  BOOST_TEST(id_mismatches + decode_mismatches == 0, style << ": " << id_mismatches << " ids and " << decode_mismatches
                                                            << " decodes of " << checked << " differ; first:\n"
                                                            << first);
}

// The Split pattern of a style's tokenizer.json (GPT-2's regex for the ByteLevel pre-tokenizer).
std::string split_pattern(const std::string& style) {
  std::ifstream in(kBpeDir / style / "tokenizer.json");
  const nlohmann::json pre_tokenizer = nlohmann::json::parse(in).at("pre_tokenizer");
  if (pre_tokenizer.at("type") == "ByteLevel") return hpctrain::tokenize::detail::kGpt2Pattern;
  return pre_tokenizer.at("pretokenizers").at(0).at("pattern").at("Regex");
}

// The regex engine alone (see Note [Regex engine]): pieces equal to Oniguruma's for every text, which catches a
// difference that BPE would hide (pieces that no merge crosses give the same ids however they are split).
void check_pieces(const std::string& style) {
  const hpctrain::tokenize::detail::Regex regex(split_pattern(style), false, style);
  size_t checked = 0, mismatches = 0;
  for (const BpeCase& c : bpe_cases()) {
    if (c.style != style) continue;
    std::vector<std::string_view> views;
    regex.split_isolated(c.text, views);
    std::vector<std::string> pieces;
    for (const auto view : views) hpctrain::tokenize::detail::append_byte_level(view, pieces.emplace_back());
    ++checked;
    if (pieces != c.pieces && mismatches++ == 0) {
      BOOST_TEST(pieces == c.pieces, style << " text \"" << escaped(c.text) << "\": " << fmt::format("{}", pieces)
                                          << " != " << fmt::format("{}", c.pieces));
    }
  }
  BOOST_TEST(checked > 0u);
  BOOST_TEST(mismatches == 0u, style << ": pieces of " << mismatches << " of " << checked << " texts differ");
}

}  // namespace

BOOST_AUTO_TEST_SUITE(bpe_golden)

BOOST_AUTO_TEST_CASE(regex_pieces_match_oniguruma) {
  for (const char* style : {"gpt2", "llama3", "qwen2"}) check_pieces(style);
}

// ByteLevel pre-tokenizer with GPT-2's regex, merges as "a b" strings.
BOOST_AUTO_TEST_CASE(gpt2_style_matches_hugging_face) { check_style("gpt2", 300); }

// Sequence[Split(Llama-3 regex, Isolated), ByteLevel(use_regex=false)], BOS template, ignore_merges, merge pairs.
BOOST_AUTO_TEST_CASE(llama3_style_matches_hugging_face) { check_style("llama3", 300); }

// Qwen2: NFC normalizer, single-digit regex, ByteLevel post-processor.
BOOST_AUTO_TEST_CASE(qwen2_style_matches_hugging_face) { check_style("qwen2", 300); }

BOOST_AUTO_TEST_SUITE_END()
