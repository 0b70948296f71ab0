// ByteLevelBpeTokenizer loading: both merge formats, the special-token ids, and every unsupported or malformed
// tokenizer.json component refused with an error naming the file and the field.
#include "golden_cases.hpp"
#include "hpctrain/core/error.hpp"
#include "hpctrain/tokenize/byte_level_bpe.hpp"

#include <boost/test/unit_test.hpp>
#include <nlohmann/json.hpp>

#include <fstream>
#include <functional>

using namespace hpctrain::tokenize;
using namespace hpctrain::tokenize::testing;
namespace fs = std::filesystem;

namespace {

const fs::path kBpeDir = kGoldenDir / "bpe";

nlohmann::json golden_json(const std::string& style) {
  std::ifstream in(kBpeDir / style / "tokenizer.json");
  return nlohmann::json::parse(in);
}

// Loads json written as tokenizer.json into a fresh folder (without tokenizer_config.json).
ByteLevelBpeTokenizer load(const nlohmann::json& json) {
  TempDir dir;
  dir.write("tokenizer.json", json.dump());
  return ByteLevelBpeTokenizer::from_pretrained(dir.path());
}

// Loading the edited golden tokenizer.json must throw hpctrain::Error containing every fragment.
void expect_refused(const std::string& style, const std::function<void(nlohmann::json&)>& edit,
                    const std::vector<std::string>& fragments) {
  nlohmann::json json = golden_json(style);
  edit(json);
  try {
    (void)load(json);
    BOOST_ERROR("expected an error containing '" << fragments.front() << "', the tokenizer loaded");
  } catch (const hpctrain::Error& e) {
    const std::string message = e.what();
    BOOST_TEST(message.find("tokenizer.json") != std::string::npos, message);
    for (const auto& fragment : fragments) {
      BOOST_TEST(message.find(fragment) != std::string::npos, "'" << fragment << "' not in: " << message);
    }
  }
}

const std::vector<std::string> kTexts = {"Hello world, it's 2024!\n", "  GNU General Public License v3 ",
                                         "<|eot_id|>émoji 😀 x", "", "123456 don'T\r\n\r\n"};

}  // namespace

BOOST_AUTO_TEST_SUITE(bpe_loading)

BOOST_AUTO_TEST_CASE(merges_as_strings_or_pairs_give_the_same_ids) {
  for (const std::string style : {"gpt2", "llama3"}) {
    nlohmann::json strings = golden_json(style), pairs = golden_json(style);
    for (auto& merge : strings["model"]["merges"]) {
      if (merge.is_array()) merge = merge[0].get<std::string>() + " " + merge[1].get<std::string>();
    }
    for (auto& merge : pairs["model"]["merges"]) {
      if (merge.is_string()) {
        const std::string text = merge;
        merge = nlohmann::json::array({text.substr(0, text.find(' ')), text.substr(text.find(' ') + 1)});
      }
    }
    const auto from_strings = load(strings), from_pairs = load(pairs);
    for (const auto& text : kTexts) BOOST_TEST(from_strings.encode(text) == from_pairs.encode(text), style << ": " << text);
  }
}

BOOST_AUTO_TEST_CASE(special_token_ids_and_vocab_size) {
  const auto llama3 = ByteLevelBpeTokenizer::from_pretrained(kBpeDir / "llama3");
  BOOST_TEST((llama3.bos_id() == llama3.token_to_id("<|begin_of_text|>")));
  BOOST_TEST((llama3.eos_id() == llama3.token_to_id("<|eot_id|>")));
  BOOST_TEST(llama3.vocab_size() == 1504u);  // 1503 model tokens and the added token [TOOL]
  BOOST_TEST((llama3.token_to_id("[TOOL]") == std::optional<int32_t>(1503)));
  BOOST_TEST(llama3.files().size() == 2u);
  BOOST_TEST(llama3.encode("hi", false).size() + 1 == llama3.encode("hi").size());
  BOOST_TEST(llama3.encode("hi").front() == *llama3.bos_id());
  const auto gpt2 = ByteLevelBpeTokenizer::from_pretrained(kBpeDir / "gpt2" / "tokenizer.json");
  BOOST_TEST((gpt2.eos_id() == gpt2.token_to_id("<|endoftext|>")));
  BOOST_TEST(!ByteLevelBpeTokenizer::from_pretrained(kBpeDir / "qwen2").bos_id().has_value());
}

// Llama-3's ignore_merges: a word in the vocabulary is one token even where the merges would split it.
BOOST_AUTO_TEST_CASE(ignore_merges_emits_vocabulary_words) {
  nlohmann::json json = golden_json("llama3");
  const auto with = load(json);
  json["model"]["ignore_merges"] = false;
  const auto without = load(json);
  const auto zebra = with.token_to_id("Ġzebra");
  BOOST_TEST(with.encode(" zebra", false) == std::vector<int32_t>{*zebra});
  BOOST_TEST(without.encode(" zebra", false).size() > 1u);
}

BOOST_AUTO_TEST_CASE(decode_skips_unknown_ids_and_replaces_broken_utf8) {
  const auto gpt2 = ByteLevelBpeTokenizer::from_pretrained(kBpeDir / "gpt2");
  const auto ids = gpt2.encode("a😀b");
  std::vector<int32_t> with_unknown = ids;
  with_unknown.insert(with_unknown.begin() + 1, {-1, 1 << 30});
  BOOST_TEST(gpt2.decode(with_unknown) == "a😀b");
  BOOST_TEST(gpt2.decode({*gpt2.token_to_id("ð")}) == "\xEF\xBF\xBD");  // 0xF0 alone: U+FFFD
  BOOST_TEST(gpt2.encode("\xFF") == gpt2.encode("\xEF\xBF\xBD"));       // invalid UTF-8 reads as U+FFFD
}

BOOST_AUTO_TEST_CASE(long_runs_do_not_exhaust_the_regex_engine) {
  const auto llama3 = ByteLevelBpeTokenizer::from_pretrained(kBpeDir / "llama3");
  const auto gpt2 = ByteLevelBpeTokenizer::from_pretrained(kBpeDir / "gpt2");
  for (const std::string& text : {std::string(200000, ' '), std::string(200000, 'a'), std::string(100000, '7')}) {
    BOOST_TEST(gpt2.decode(gpt2.encode(text)) == text);
    BOOST_TEST(llama3.decode(llama3.encode(text, false)) == text);
  }
}

BOOST_AUTO_TEST_CASE(unsupported_components_are_refused_by_name) {
  using J = nlohmann::json;
  expect_refused("gpt2", [](J& j) { j["model"]["type"] = "WordPiece"; }, {"model.type", "\"BPE\"", "WordPiece"});
  expect_refused("gpt2", [](J& j) { j["model"]["dropout"] = 0.1; }, {"model.dropout", "0.1"});
  expect_refused("gpt2", [](J& j) { j["model"]["byte_fallback"] = true; }, {"model.byte_fallback"});
  expect_refused("gpt2", [](J& j) { j["model"]["continuing_subword_prefix"] = "##"; }, {"continuing_subword_prefix"});
  expect_refused("gpt2", [](J& j) { j["model"]["end_of_word_suffix"] = "</w>"; }, {"end_of_word_suffix"});
  expect_refused("gpt2", [](J& j) { j["normalizer"] = {{"type", "Lowercase"}}; }, {"normalizer.type", "Lowercase"});
  expect_refused("gpt2", [](J& j) { j["pre_tokenizer"] = {{"type", "Whitespace"}}; }, {"pre_tokenizer.type", "Whitespace"});
  expect_refused("gpt2", [](J& j) { j["pre_tokenizer"]["add_prefix_space"] = true; }, {"pre_tokenizer.add_prefix_space"});
  expect_refused("gpt2", [](J& j) { j["pre_tokenizer"] = nullptr; }, {"pre_tokenizer", "ByteLevel"});
  expect_refused("llama3", [](J& j) { j["pre_tokenizer"]["pretokenizers"][0]["behavior"] = "Removed"; },
                 {"pre_tokenizer.pretokenizers[0].behavior", "Removed"});
  expect_refused("llama3", [](J& j) { j["pre_tokenizer"]["pretokenizers"][0]["invert"] = true; }, {"invert"});
  expect_refused("llama3", [](J& j) { j["pre_tokenizer"]["pretokenizers"][1]["type"] = "Digits"; },
                 {"pre_tokenizer.pretokenizers[1].type", "Digits"});
  expect_refused("llama3", [](J& j) { j["pre_tokenizer"]["pretokenizers"][0]["pattern"] = {{"Regex", "(unclosed"}}; },
                 {"pre_tokenizer.pretokenizers[0].pattern.Regex", "(unclosed"});
  expect_refused("gpt2", [](J& j) { j["post_processor"] = {{"type", "RobertaProcessing"}}; },
                 {"post_processor.type", "RobertaProcessing"});
  expect_refused("llama3", [](J& j) { j["post_processor"]["processors"][1]["type"] = "BertProcessing"; },
                 {"post_processor.processors[1].type", "BertProcessing"});
  expect_refused("gpt2", [](J& j) { j["decoder"] = {{"type", "WordPiece"}}; }, {"decoder.type", "WordPiece"});
  expect_refused("gpt2", [](J& j) { j["decoder"] = nullptr; }, {"decoder"});
  expect_refused("gpt2", [](J& j) { j["added_tokens"][0]["lstrip"] = true; }, {"added_tokens[0].lstrip"});
  expect_refused("gpt2", [](J& j) { j["added_tokens"][0]["single_word"] = true; }, {"added_tokens[0].single_word"});
  expect_refused("gpt2", [](J& j) { j["truncation"] = {{"max_length", 8}}; }, {"truncation"});
}

BOOST_AUTO_TEST_CASE(malformed_fields_are_refused_by_name) {
  using J = nlohmann::json;
  expect_refused("gpt2", [](J& j) { j["model"]["merges"][3] = "nospace"; }, {"model.merges[3]", "nospace"});
  expect_refused("llama3", [](J& j) { j["model"]["merges"][2] = J::array({"a"}); }, {"model.merges[2]"});
  expect_refused("gpt2", [](J& j) { j["model"]["merges"][0] = "Ġ zzzz"; }, {"model.merges", "[0]", "zzzz"});
  expect_refused("gpt2", [](J& j) { j["model"]["vocab"]["Ġt"] = "five"; }, {"model.vocab.Ġt", "five"});
  expect_refused("gpt2", [](J& j) { j["model"]["vocab"]["Ġt"] = 0; }, {"model.vocab", "same id 0"});
  expect_refused("gpt2", [](J& j) { j["added_tokens"][0]["id"] = 5; }, {"added_tokens[0].id", "(0)"});
  expect_refused("llama3", [](J& j) { j["post_processor"]["processors"][1]["special_tokens"]["<|begin_of_text|>"]["ids"] =
                                          J::array({99999}); },
                 {"special_tokens.<|begin_of_text|>.ids", "99999"});
  TempDir dir;
  dir.write("tokenizer.json", "{\"model\": ");
  BOOST_CHECK_THROW(ByteLevelBpeTokenizer::from_pretrained(dir.path()), hpctrain::Error);
  BOOST_CHECK_THROW(ByteLevelBpeTokenizer::from_pretrained(dir.path() / "missing"), hpctrain::Error);
}

BOOST_AUTO_TEST_CASE(tokenizer_config_add_bos_token_is_refused) {
  TempDir dir;
  dir.write("tokenizer.json", golden_json("gpt2").dump());
  dir.write("tokenizer_config.json", R"({"add_bos_token": true})");
  BOOST_CHECK_EXCEPTION(ByteLevelBpeTokenizer::from_pretrained(dir.path()), hpctrain::Error, [](const auto& e) {
    return std::string(e.what()).find("tokenizer_config.json: field 'add_bos_token'") != std::string::npos;
  });
}

BOOST_AUTO_TEST_SUITE_END()
