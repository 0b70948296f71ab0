// BertTokenizer::from_pretrained: reads tokenizer.json or vocab.txt, plus tokenizer_config.json, strictly.
#include "hpctrain/tokenize/bert_tokenizer.hpp"

#include "hpctrain/core/error.hpp"
#include "tokenize/json_fields.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

namespace hpctrain::tokenize {
namespace {

namespace fs = std::filesystem;
using detail::JsonObject;

constexpr const char* kTokenizerJson = "tokenizer.json";
constexpr const char* kVocabTxt = "vocab.txt";
constexpr const char* kTokenizerConfigJson = "tokenizer_config.json";

void add_unique(std::vector<std::string>& tokens, const std::string& token) {
  if (std::find(tokens.begin(), tokens.end(), token) == tokens.end()) tokens.push_back(token);
}

// tokenizer_config.json: its explicit fields win over tokenizer.json, as in transformers' BertTokenizerFast.
void apply_tokenizer_config(const JsonObject& root, TokenizerConfig& config) {
  config.do_lower_case = root.get_bool("do_lower_case", config.do_lower_case);
  if (root.json().contains("strip_accents")) config.strip_accents = root.get_optional_bool("strip_accents");
  config.tokenize_chinese_chars = root.get_bool("tokenize_chinese_chars", config.tokenize_chinese_chars);
  config.model_max_length = root.get_int("model_max_length", config.model_max_length);
  config.unk_token = root.get_token("unk_token", config.unk_token);
  config.cls_token = root.get_token("cls_token", config.cls_token);
  config.sep_token = root.get_token("sep_token", config.sep_token);
  config.pad_token = root.get_token("pad_token", config.pad_token);
  config.mask_token = root.get_token("mask_token", config.mask_token);
  if (!root.has("additional_special_tokens")) return;
  const auto& extra = root.array("additional_special_tokens");
  for (size_t i = 0; i < extra.size(); ++i) {
    const auto& token = extra[i];
    if (!token.is_string() && !(token.is_object() && token.contains("content") && token["content"].is_string())) {
      root.fail_field(fmt::format("additional_special_tokens[{}]", i), "a string or an AddedToken object", token);
    }
    add_unique(config.additional_special_tokens,
               token.is_string() ? token.get<std::string>() : token["content"].get<std::string>());
  }
}

// Serializes a TemplateProcessing template as "[CLS]:0 $A:0 [SEP]:0".
std::string template_text(const JsonObject& processor, const std::string& field) {
  std::string text;
  for (const auto& item : processor.array(field)) {
    const bool special = item.contains("SpecialToken"), sequence = item.contains("Sequence");
    if (!special && !sequence) processor.fail_field(field, "SpecialToken or Sequence items", item);
    const auto& piece = item[special ? "SpecialToken" : "Sequence"];
    if (!piece.contains("id") || !piece["id"].is_string() || !piece.contains("type_id")) {
      processor.fail_field(field, "items with \"id\" and \"type_id\"", item);
    }
    text += fmt::format("{}{}{}:{}", text.empty() ? "" : " ", sequence ? "$" : "", piece["id"].get<std::string>(),
                        piece["type_id"].dump());
  }
  return text;
}

// The id a post-processor gives a special token must be the token's vocabulary id.
void check_special_id(const JsonObject& processor, const std::string& field, const std::string& token,
                      const nlohmann::json& id, const Vocab& vocab) {
  const auto expected = vocab.find(token);
  if (!expected || !id.is_number_integer() || id.get<int64_t>() != *expected) {
    processor.fail_field(field, fmt::format("the vocabulary id of '{}' ({})", token, expected ? *expected : -1), id);
  }
}

void read_bert_processing(const JsonObject& processor, const Vocab& vocab, TokenizerConfig& config) {
  for (const char* field : {"cls", "sep"}) {
    const auto& pair = processor.array(field);
    if (pair.size() != 2 || !pair[0].is_string()) processor.fail_field(field, "[token, id]", pair);
    check_special_id(processor, field, pair[0].get<std::string>(), pair[1], vocab);
  }
  config.cls_token = processor.array("cls")[0].get<std::string>();
  config.sep_token = processor.array("sep")[0].get<std::string>();
}

void read_template_processing(const JsonObject& processor, const Vocab& vocab, TokenizerConfig& config) {
  const std::string single = template_text(processor, "single");  // validates the items
  const auto& items = processor.array("single");
  if (items.size() != 3 || !items[0].contains("SpecialToken") || !items[2].contains("SpecialToken")) {
    processor.fail_field("single", "\"[CLS]:0 $A:0 [SEP]:0\"", single);
  }
  const std::string cls = items[0]["SpecialToken"]["id"].get<std::string>();
  const std::string sep = items[2]["SpecialToken"]["id"].get<std::string>();
  const std::string expected_single = fmt::format("{}:0 $A:0 {}:0", cls, sep);
  const std::string expected_pair = fmt::format("{}:0 $A:0 {}:0 $B:1 {}:1", cls, sep, sep);
  if (single != expected_single) processor.fail_field("single", "\"" + expected_single + "\"", single);
  const std::string pair = template_text(processor, "pair");
  if (pair != expected_pair) processor.fail_field("pair", "\"" + expected_pair + "\"", pair);
  const JsonObject specials = processor.object("special_tokens");
  for (const std::string& token : {cls, sep}) {
    const auto& ids = specials.object(token).array("ids");
    if (ids.size() != 1) specials.fail_field(token + ".ids", "one id", ids);
    check_special_id(specials, token + ".ids", token, ids[0], vocab);
  }
  config.cls_token = cls;
  config.sep_token = sep;
}

// Reads the [CLS] and [SEP] tokens from a BERT post-processor, insisting on the BERT template.
void read_post_processor(const JsonObject& root, const Vocab& vocab, TokenizerConfig& config) {
  const JsonObject processor = root.object("post_processor");
  const std::string type = processor.required_string("type");
  if (type == "BertProcessing") return read_bert_processing(processor, vocab, config);
  if (type != "TemplateProcessing") processor.fail_field("type", "\"TemplateProcessing\" or \"BertProcessing\"", type);
  read_template_processing(processor, vocab, config);
}

// Added tokens must be plain vocabulary entries matched verbatim in the raw text (how BERT's special tokens are).
void read_added_tokens(const JsonObject& root, const Vocab& vocab, TokenizerConfig& config) {
  if (!root.has("added_tokens")) return;
  const auto& added = root.array("added_tokens");
  for (size_t i = 0; i < added.size(); ++i) {
    const std::string field = fmt::format("added_tokens[{}]", i);
    const JsonObject entry(added[i], root.file(), field);
    const std::string content = entry.required_string("content");
    const int64_t id = entry.get_int("id", -1);
    const auto vocab_id = vocab.find(content);
    if (!vocab_id || *vocab_id != id) {
      root.fail_field(field, fmt::format("a token of model.vocab with its id ({})", vocab_id ? *vocab_id : -1), added[i]);
    }
    for (const char* flag : {"lstrip", "rstrip", "single_word", "normalized"}) {
      if (entry.get_bool(flag, false)) root.fail_field(field + "." + flag, "false (not supported)", true);
    }
    const bool known = content == config.unk_token || content == config.cls_token || content == config.sep_token ||
                       content == config.pad_token || content == config.mask_token;
    if (!known) add_unique(config.additional_special_tokens, content);
  }
}

void read_normalizer(const JsonObject& root, TokenizerConfig& config) {
  const JsonObject normalizer = root.object("normalizer");
  const std::string type = normalizer.required_string("type");
  if (type != "BertNormalizer") normalizer.fail_field("type", "\"BertNormalizer\"", type);
  config.clean_text = normalizer.get_bool("clean_text", true);
  config.tokenize_chinese_chars = normalizer.get_bool("handle_chinese_chars", true);
  config.strip_accents = normalizer.get_optional_bool("strip_accents");
  config.do_lower_case = normalizer.get_bool("lowercase", true);
}

TokenizerConfig read_tokenizer_json(const JsonObject& root, std::optional<Vocab>& vocab) {
  TokenizerConfig config;
  const JsonObject model = root.object("model");
  const std::string type = model.get_string("type", "");
  if (type != "WordPiece") model.fail_field("type", "\"WordPiece\"", type);
  vocab = read_model_vocab(model);
  config.unk_token = model.required_string("unk_token");
  config.continuing_subword_prefix = model.get_string("continuing_subword_prefix", "##");
  const int64_t max_chars = model.get_int("max_input_chars_per_word", 100);
  if (max_chars <= 0 || max_chars > std::numeric_limits<int>::max()) {
    model.fail_field("max_input_chars_per_word", "a positive int", max_chars);
  }
  config.max_input_chars_per_word = int(max_chars);
  read_normalizer(root, config);
  const JsonObject pre_tokenizer = root.object("pre_tokenizer");
  if (pre_tokenizer.required_string("type") != "BertPreTokenizer") {
    pre_tokenizer.fail_field("type", "\"BertPreTokenizer\"", pre_tokenizer.json()["type"]);
  }
  read_post_processor(root, *vocab, config);
  return config;
}

// The special tokens tokenizer_config.json names must agree with what tokenizer.json encodes.
void check_agrees(const TokenizerConfig& from_json, const TokenizerConfig& merged, const fs::path& config_file) {
  const std::pair<const char*, std::pair<std::string, std::string>> tokens[] = {
      {"unk_token", {from_json.unk_token, merged.unk_token}},
      {"cls_token", {from_json.cls_token, merged.cls_token}},
      {"sep_token", {from_json.sep_token, merged.sep_token}}};
  for (const auto& [field, values] : tokens) {
    HPCTRAIN_CHECK(values.first == values.second, "{}: field '{}': expected \"{}\" (as in {}), got \"{}\"",
                   config_file.string(), field, values.first, kTokenizerJson, values.second);
  }
}

}  // namespace

Vocab tokenizer_json_vocab(const fs::path& tokenizer_json) {
  const nlohmann::json root = detail::read_json_file(tokenizer_json);
  return read_model_vocab(JsonObject(root, tokenizer_json.string(), "").object("model"));
}

BertTokenizer BertTokenizer::from_pretrained(const fs::path& dir) {
  HPCTRAIN_CHECK(fs::is_directory(dir), "tokenizer folder '{}' does not exist or is not a directory", dir.string());
  const fs::path tokenizer_json = dir / kTokenizerJson, vocab_txt = dir / kVocabTxt;
  const fs::path config_json = dir / kTokenizerConfigJson;
  std::vector<fs::path> files;
  std::optional<Vocab> vocab;
  TokenizerConfig config;
  std::optional<nlohmann::json> tokenizer_root;
  if (fs::exists(tokenizer_json)) {
    tokenizer_root = detail::read_json_file(tokenizer_json);
    const JsonObject root(*tokenizer_root, tokenizer_json.string(), "");
    config = read_tokenizer_json(root, vocab);
    read_added_tokens(root, *vocab, config);
    files.push_back(tokenizer_json);
  } else if (fs::exists(vocab_txt)) {
    vocab = Vocab::from_file(vocab_txt);
    files.push_back(vocab_txt);
  } else {
    fail("tokenizer folder '{}': no tokenizer found (looked for {} and {}); hint: save one with "
         "transformers' tokenizer.save_pretrained(folder)", dir.string(), kTokenizerJson, kVocabTxt);
  }
  if (fs::exists(config_json)) {
    const nlohmann::json config_root = detail::read_json_file(config_json);
    const TokenizerConfig from_json = config;
    apply_tokenizer_config(JsonObject(config_root, config_json.string(), ""), config);
    if (tokenizer_root) check_agrees(from_json, config, config_json);
    files.push_back(config_json);
  }
  BertTokenizer tokenizer(std::move(*vocab), std::move(config));
  tokenizer.files_ = std::move(files);
  return tokenizer;
}

}  // namespace hpctrain::tokenize
