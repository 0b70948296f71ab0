// from_pretrained: vocab.txt and tokenizer.json give the same tokenizer; broken folders give errors that name the
// file, the field, what was expected and what was found.
#include "golden_cases.hpp"
#include "hpctrain/core/error.hpp"
#include "hpctrain/core/sha256.hpp"

#include <boost/test/unit_test.hpp>
#include <nlohmann/json.hpp>

#include <fstream>
#include <functional>

using namespace hpctrain::tokenize;
using namespace hpctrain::tokenize::testing;
namespace fs = std::filesystem;

namespace {

// Runs load and checks it throws hpctrain::Error whose message contains every fragment.
void expect_error(const std::function<void()>& load, const std::vector<std::string>& fragments) {
  try {
    load();
    BOOST_ERROR("expected hpctrain::Error containing '" << fragments.front() << "', nothing was thrown");
  } catch (const hpctrain::Error& e) {
    const std::string message = e.what();
    for (const auto& fragment : fragments) {
      BOOST_TEST(message.find(fragment) != std::string::npos, "'" << fragment << "' not in: " << message);
    }
  }
}

nlohmann::json tiny_tokenizer_json() {
  std::ifstream in(kGoldenDir / "tiny" / "tokenizer.json");
  return nlohmann::json::parse(in);
}

std::string read_file(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// A tokenizer.json for bert-base-uncased, made from the reference's tiny tokenizer.json (same schema).
nlohmann::json bert_tokenizer_json() {
  nlohmann::json root = tiny_tokenizer_json();
  const Vocab vocab = Vocab::from_file(kBertDir / "vocab.txt");
  nlohmann::json& model_vocab = root["model"]["vocab"] = nlohmann::json::object();
  for (size_t id = 0; id < vocab.size(); ++id) model_vocab[vocab.tokens()[id]] = id;
  root["normalizer"]["lowercase"] = true;
  root["normalizer"]["strip_accents"] = nullptr;
  nlohmann::json added = nlohmann::json::array();
  for (const auto& token : root["added_tokens"]) {
    if (token["content"] == "[EOT]") continue;
    added.push_back(token);
    added.back()["id"] = vocab.id_of(token["content"].get<std::string>());
  }
  root["added_tokens"] = added;
  root["post_processor"]["special_tokens"]["[CLS]"]["ids"] = {vocab.id_of("[CLS]")};
  root["post_processor"]["special_tokens"]["[SEP]"]["ids"] = {vocab.id_of("[SEP]")};
  return root;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(loading)

BOOST_AUTO_TEST_CASE(tokenizer_json_equals_vocab_txt) {
  TempDir dir;
  dir.write("tokenizer.json", bert_tokenizer_json().dump());
  const BertTokenizer from_json = BertTokenizer::from_pretrained(dir.path());
  const BertTokenizer from_txt = BertTokenizer::from_pretrained(kBertDir);
  nlohmann::json json_description = from_json.describe(), txt_description = from_txt.describe();
  json_description.erase("model_max_length");  // only tokenizer_config.json has it
  txt_description.erase("model_max_length");
  BOOST_TEST(json_description.dump() == txt_description.dump());
  size_t compared = 0;
  for (const GoldenCase& c : load_golden_cases()) {
    if (c.variant != "uncased") continue;
    const auto a = c.text_pair ? from_json.encode_pair(c.text, *c.text_pair, c.max_length)
                               : from_json.encode(c.text, c.max_length);
    BOOST_TEST(a.input_ids == c.input_ids, "line " << c.line);
    ++compared;
  }
  BOOST_TEST(compared > 500u);
}

BOOST_AUTO_TEST_CASE(describe_and_files) {
  const BertTokenizer tokenizer = BertTokenizer::from_pretrained(kBertDir);
  const nlohmann::json d = tokenizer.describe();
  BOOST_TEST(d.at("type") == "wordpiece");
  BOOST_TEST(d.at("vocab_sha256") == hpctrain::sha256_file_hex(kBertDir / "vocab.txt"));
  BOOST_TEST(d.at("vocab_size") == tokenizer.vocab().size());
  BOOST_TEST(d.at("do_lower_case") == true);
  BOOST_TEST(d.at("strip_accents").is_null());
  BOOST_TEST(d.at("model_max_length") == 512);
  BOOST_TEST(tokenizer.files().size() == 2u);
  BOOST_TEST(tokenizer.files().at(0) == kBertDir / "vocab.txt");
  BOOST_TEST(tokenizer.files().at(1) == kBertDir / "tokenizer_config.json");
  BOOST_TEST(tokenizer.vocab().token(tokenizer.cls_id()) == "[CLS]");
  BOOST_TEST(tokenizer.vocab().token(tokenizer.sep_id()) == "[SEP]");
  BOOST_TEST(tokenizer.vocab().token(tokenizer.pad_id()) == "[PAD]");
  BOOST_TEST(tokenizer.vocab().token(tokenizer.unk_id()) == "[UNK]");
  BOOST_TEST(tokenizer.vocab().token(tokenizer.mask_id()) == "[MASK]");
}

BOOST_AUTO_TEST_CASE(tiny_folder_describe_and_files) {
  TempDir dir;
  for (const char* file : {"tokenizer.json", "vocab.txt", "tokenizer_config.json"}) {
    std::filesystem::copy_file(kGoldenDir / "tiny" / file, dir.path() / file);
  }
  const BertTokenizer tokenizer = BertTokenizer::from_pretrained(dir.path());
  const nlohmann::json d = tokenizer.describe();
  BOOST_TEST(d.at("additional_special_tokens").dump() == R"(["[EOT]"])");  // from both files, listed once
  BOOST_TEST(d.at("do_lower_case") == false);
  BOOST_TEST(d.at("strip_accents") == true);
  BOOST_TEST(d.at("model_max_length") == 64);
  BOOST_TEST(d.at("vocab_sha256") == hpctrain::sha256_file_hex(dir.path() / "vocab.txt"));
  BOOST_TEST(tokenizer.files().size() == 2u);  // tokenizer.json wins over vocab.txt
  BOOST_TEST(tokenizer.files().at(0) == dir.path() / "tokenizer.json");
}

// Note [Tokenizer matches the dataset]: tokenizer.json's model.vocab hashes as the vocab.txt of the same tokens;
// two ids swapped change it.
BOOST_AUTO_TEST_CASE(tokenizer_json_vocab_hashes_as_vocab_txt) {
  TempDir dir;
  const Vocab from_json = tokenizer_json_vocab(kGoldenDir / "tiny" / "tokenizer.json");
  BOOST_TEST(from_json.sha256() == hpctrain::sha256_file_hex(kGoldenDir / "tiny" / "vocab.txt"));
  nlohmann::json swapped = tiny_tokenizer_json();
  auto& vocab = swapped["model"]["vocab"];
  std::swap(vocab["the"], vocab["over"]);
  dir.write("tokenizer.json", swapped.dump());
  BOOST_TEST(tokenizer_json_vocab(dir.path() / "tokenizer.json").sha256() != from_json.sha256());
  vocab["over"] = vocab["the"];
  dir.write("tokenizer.json", swapped.dump());
  expect_error([&] { (void)tokenizer_json_vocab(dir.path() / "tokenizer.json"); },
               {"tokenizer.json", "have the same id"});
}

BOOST_AUTO_TEST_CASE(missing_folder_and_files) {
  TempDir dir;
  expect_error([&] { BertTokenizer::from_pretrained(dir.path() / "nope"); }, {"nope", "does not exist"});
  expect_error([&] { BertTokenizer::from_pretrained(dir.path()); },
               {dir.path().string(), "tokenizer.json", "vocab.txt", "no tokenizer found"});
}

BOOST_AUTO_TEST_CASE(vocab_errors) {
  TempDir dir;
  dir.write("vocab.txt", "[PAD]\n[UNK]\nfoo\n[CLS]\nfoo\n[SEP]\n[MASK]\n");
  expect_error([&] { BertTokenizer::from_pretrained(dir.path()); },
               {"vocab.txt: line 5: duplicate token 'foo' (first at line 3)"});
  dir.write("vocab.txt", "[PAD]\n[CLS]\n\n[SEP]\n");
  expect_error([&] { BertTokenizer::from_pretrained(dir.path()); }, {"vocab.txt: line 3: empty token"});
  dir.write("vocab.txt", "[PAD]\n[CLS]\n[SEP]\n[MASK]\nhello\n");
  expect_error([&] { BertTokenizer::from_pretrained(dir.path()); }, {"[UNK]", "not in the vocabulary"});
  dir.write("vocab.txt", "[PAD]\n[UNK]\n[CLS]\n[SEP]\n");
  expect_error([&] { BertTokenizer::from_pretrained(dir.path()); }, {"[MASK]", "not in the vocabulary"});
}

BOOST_AUTO_TEST_CASE(vocab_with_crlf_line_ends_loads) {
  TempDir dir;
  dir.write("vocab.txt", "[PAD]\r\n[UNK]\r\n[CLS]\r\n[SEP]\r\n[MASK]\r\nhello\r\n##s");
  const BertTokenizer tokenizer = BertTokenizer::from_pretrained(dir.path());
  BOOST_TEST(tokenizer.vocab().size() == 7u);
  BOOST_TEST(tokenizer.vocab().token(5) == "hello");
  BOOST_TEST(tokenizer.vocab().token(6) == "##s");
}

BOOST_AUTO_TEST_CASE(tokenizer_config_errors) {
  TempDir dir;
  std::filesystem::copy_file(kBertDir / "vocab.txt", dir.path() / "vocab.txt");
  dir.write("tokenizer_config.json", "{\"do_lower_case\": true,");
  expect_error([&] { BertTokenizer::from_pretrained(dir.path()); }, {"tokenizer_config.json", "invalid JSON"});
  dir.write("tokenizer_config.json", R"({"do_lower_case": "yes"})");
  expect_error([&] { BertTokenizer::from_pretrained(dir.path()); },
               {R"(tokenizer_config.json: field 'do_lower_case': expected a boolean, got "yes")"});
  dir.write("tokenizer_config.json", R"({"model_max_length": "long"})");
  expect_error([&] { BertTokenizer::from_pretrained(dir.path()); },
               {"field 'model_max_length': expected an integer"});
  dir.write("tokenizer_config.json", R"({"unk_token": {"content": "[NOPE]"}})");
  expect_error([&] { BertTokenizer::from_pretrained(dir.path()); }, {"[NOPE]", "not in the vocabulary"});
  dir.write("tokenizer_config.json", R"([1, 2])");
  expect_error([&] { BertTokenizer::from_pretrained(dir.path()); }, {"tokenizer_config.json", "expected a JSON object"});
}

BOOST_AUTO_TEST_CASE(tokenizer_config_fields_apply) {
  TempDir dir;
  std::filesystem::copy_file(kBertDir / "vocab.txt", dir.path() / "vocab.txt");
  dir.write("tokenizer_config.json",
            R"({"do_lower_case": false, "strip_accents": true, "model_max_length": 1e30,
                "mask_token": {"content": "[MASK]", "lstrip": false, "__type": "AddedToken"}})");
  const BertTokenizer tokenizer = BertTokenizer::from_pretrained(dir.path());
  BOOST_TEST(tokenizer.config().do_lower_case == false);
  BOOST_TEST((tokenizer.config().strip_accents == std::optional<bool>(true)));
  BOOST_TEST(tokenizer.config().model_max_length == std::numeric_limits<int64_t>::max());
}

BOOST_AUTO_TEST_CASE(tokenizer_json_errors) {
  TempDir dir;
  auto load = [&] { BertTokenizer::from_pretrained(dir.path()); };
  auto write = [&](const nlohmann::json& root) { dir.write("tokenizer.json", root.dump()); };
  dir.write("tokenizer.json", "{\"model\": ");
  expect_error(load, {"tokenizer.json", "invalid JSON"});
  nlohmann::json root = tiny_tokenizer_json();
  root["model"]["type"] = "BPE";
  write(root);
  expect_error(load, {"tokenizer.json: field 'model.type': expected \"WordPiece\", got \"BPE\""});
  root = tiny_tokenizer_json();
  root["normalizer"] = {{"type", "NFKC"}};
  write(root);
  expect_error(load, {"field 'normalizer.type': expected \"BertNormalizer\", got \"NFKC\""});
  root = tiny_tokenizer_json();
  root["normalizer"]["lowercase"] = 1;
  write(root);
  expect_error(load, {"field 'normalizer.lowercase': expected a boolean, got 1"});
  root = tiny_tokenizer_json();
  root["pre_tokenizer"] = {{"type", "Whitespace"}};
  write(root);
  expect_error(load, {"field 'pre_tokenizer.type': expected \"BertPreTokenizer\""});
  root = tiny_tokenizer_json();
  root["model"]["vocab"]["hello"] = 100000;
  write(root);
  expect_error(load, {"field 'model.vocab.hello': expected an id in [0,"});
  root = tiny_tokenizer_json();
  root["model"]["vocab"].erase("hello");
  write(root);
  expect_error(load, {"field 'model.vocab.", "expected an id in [0, "});
  root = tiny_tokenizer_json();
  root["model"]["vocab"]["hello"] = 0;
  write(root);
  expect_error(load, {"field 'model.vocab': tokens '[PAD]' and 'hello' have the same id 0"});
  root = tiny_tokenizer_json();
  root["model"].erase("unk_token");
  write(root);
  expect_error(load, {"field 'model.unk_token' is missing"});
  root = tiny_tokenizer_json();
  root["added_tokens"][0]["normalized"] = true;
  write(root);
  expect_error(load, {"field 'added_tokens[0].normalized': expected false (not supported)"});
  root = tiny_tokenizer_json();
  root["post_processor"]["special_tokens"]["[CLS]"]["ids"] = {5};
  write(root);
  expect_error(load, {"field 'post_processor.special_tokens.[CLS].ids': expected the vocabulary id of '[CLS]' (2), got 5"});
  root = tiny_tokenizer_json();
  root["post_processor"]["pair"] = root["post_processor"]["single"];
  write(root);
  expect_error(load, {"field 'post_processor.pair': expected \"[CLS]:0 $A:0 [SEP]:0 $B:1 [SEP]:1\""});
}

BOOST_AUTO_TEST_CASE(tokenizer_config_must_agree_with_tokenizer_json) {
  TempDir dir;
  dir.write("tokenizer.json", read_file(kGoldenDir / "tiny" / "tokenizer.json"));
  dir.write("tokenizer_config.json", R"({"cls_token": "[MASK]"})");
  expect_error([&] { BertTokenizer::from_pretrained(dir.path()); },
               {"tokenizer_config.json: field 'cls_token': expected \"[CLS]\" (as in tokenizer.json), got \"[MASK]\""});
}

BOOST_AUTO_TEST_CASE(max_length_too_small) {
  const BertTokenizer tokenizer = BertTokenizer::from_pretrained(kBertDir);
  expect_error([&] { (void)tokenizer.encode("hello", 1); }, {"max_length 1 is too small"});
  expect_error([&] { (void)tokenizer.encode_pair("a", "b", 2); }, {"max_length 2 is too small"});
  BOOST_TEST(tokenizer.encode("hello", 2).input_ids.size() == 2u);
}

BOOST_AUTO_TEST_SUITE_END()
